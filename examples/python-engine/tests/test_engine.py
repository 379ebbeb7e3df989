"""The engine over gRPC, in-process: E, PD and the aggregated baseline on loopback ports.

A few checks of each Core family, so a regression shows here in seconds; the full verdicts
come from `baton check` (run_bugs.py check).
"""

import argparse
import os
import shutil
import tempfile
import unittest

import grpc
import numpy as np

from common import FIXTURES, read_bytes
from grpc_health_v1 import health_pb2, health_pb2_grpc
from openengine.v1 import common_pb2, control_pb2, control_pb2_grpc, encoder_pb2, inference_pb2, inference_pb2_grpc
from pyengine import lm, server

PROMPT = "<image> What colour dominates?"


def cfg(role, cache):
    return argparse.Namespace(role=role, listen="127.0.0.1:0", cache_dir=cache, ready_file="", preset="py-tiny",
                              producer_quota_bytes=1 << 20, consumer_quota_bytes=1 << 20, ttl_ms=60000,
                              drain_timeout_ms=5000, test_hooks=False, bug=[], log_level="error")


def image(name):
    return common_pb2.MediaItem(modality=common_pb2.MODALITY_IMAGE, raw_bytes=read_bytes(os.path.join(FIXTURES, name)))


class EngineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.cache = os.path.join(cls.tmp, "cache")
        cls.engines, cls.servers, cls.stops, cls.channels = {}, [], [], []
        for role in ("encoder", "pd", "aggregated"):
            e, s = server.build(cfg(role, cls.cache))
            s.start()
            cls.engines[role] = e
            cls.servers.append(s)
            cls.stops.append(server.start_collector(e))
        cls.stub = {}
        for role, e in cls.engines.items():
            ch = grpc.insecure_channel("%s:%d" % e.endpoint[:2])
            cls.channels.append(ch)
            cls.stub[role] = (inference_pb2_grpc.InferenceStub(ch), control_pb2_grpc.ControlStub(ch),
                              health_pb2_grpc.HealthStub(ch))

    @classmethod
    def tearDownClass(cls):
        for stop in cls.stops:
            stop.set()
        for ch in cls.channels:
            ch.close()
        for s in cls.servers:
            s.stop(0).wait()
        cls.engines["encoder"].store.close()
        left = os.listdir(cls.cache)
        shutil.rmtree(cls.tmp, True)
        assert left == [], left

    def generate(self, role, req):
        """-> (code, events)"""
        try:
            return grpc.StatusCode.OK, list(self.stub[role][0].Generate(req, timeout=30))
        except grpc.RpcError as e:
            return e.code(), []

    def publish(self, *names, **kw):
        req = inference_pb2.GenerateRequest(request_id="p", media=[image(n) for n in names],
                                            encoder=encoder_pb2.EncoderOptions(publish=encoder_pb2.EncoderPublish(**kw)))
        code, events = self.generate("encoder", req)
        self.assertEqual(code, grpc.StatusCode.OK)
        self.assertEqual(len(events), 1)
        self.assertTrue(events[0].HasField("encoder_ready"))
        self.assertTrue(events[0].HasField("usage"))
        return events[0].encoder_ready

    def consume(self, ref, prompt=PROMPT, role="pd"):
        return self.generate(role, inference_pb2.GenerateRequest(
            request_id="c", prompt=prompt, encoder=encoder_pb2.EncoderOptions(consume=ref),
            stopping=inference_pb2.StoppingOptions(max_tokens=8)))

    def baseline(self, *names, prompt=PROMPT):
        return self.generate("aggregated", inference_pb2.GenerateRequest(
            request_id="b", prompt=prompt, media=[image(n) for n in names], stopping=inference_pb2.StoppingOptions(max_tokens=8)))

    @staticmethod
    def answer(events):
        toks = [t.token_id for ev in events if ev.HasField("token") for t in ev.token.tokens]
        u = events[-1].usage
        return toks, (u.prompt_tokens, u.completion_tokens, u.total_tokens)

    def test_b1_e_pd_equals_baseline_and_b2_images_differ(self):
        answers = {}
        for name in ("images/video-001.png", "images/basn6a08.png", "images/basn0g16.png", "images/video-001.jpeg"):
            code, pd_events = self.consume(self.publish(name).ref)
            self.assertEqual(code, grpc.StatusCode.OK)
            code, base_events = self.baseline(name)
            self.assertEqual(code, grpc.StatusCode.OK)
            self.assertEqual(self.answer(pd_events), self.answer(base_events), name)
            self.assertEqual(pd_events[-1].finished.reason, common_pb2.FINISH_REASON_LENGTH)
            answers[name] = self.answer(pd_events)[0]
        distinct = set(map(tuple, (answers[n] for n in ("images/video-001.png", "images/basn6a08.png", "images/basn0g16.png"))))
        self.assertEqual(len(distinct), 3, answers)

    def test_su2_su3_single_use(self):
        ref = self.publish("images/basn6a08.png").ref
        code, _ = self.consume(ref)
        self.assertEqual(code, grpc.StatusCode.OK)
        self.assertEqual(self.consume(ref)[0], grpc.StatusCode.INVALID_ARGUMENT)
        ctl = self.stub["encoder"][1]
        self.assertEqual(ctl.Abort(control_pb2.AbortRequest(encoder_cache=ref)).status, control_pb2.ABORT_STATUS_ALREADY_FINISHED)
        ref = self.publish("images/basn6a08.png").ref
        self.assertEqual(ctl.Abort(control_pb2.AbortRequest(encoder_cache=ref)).status, control_pb2.ABORT_STATUS_ABORTED)
        self.assertEqual(ctl.Abort(control_pb2.AbortRequest(encoder_cache=ref)).status, control_pb2.ABORT_STATUS_ALREADY_FINISHED)
        self.assertEqual(self.consume(ref)[0], grpc.StatusCode.INVALID_ARGUMENT)

    def test_precedence(self):
        ref = self.publish("images/basn6a08.png").ref
        tampered = encoder_pb2.EncoderCacheRef()
        tampered.CopyFrom(ref)
        tampered.opaque_state = ref.opaque_state[:-3] + (b"1" if ref.opaque_state[-3:-2] == b"0" else b"0") + ref.opaque_state[-2:]
        tampered.backend = "unlisted"
        self.assertEqual(self.consume(tampered)[0], grpc.StatusCode.FAILED_PRECONDITION)  # N-1 before SU-5
        tampered.opaque_state = b"\xff garbage"
        self.assertEqual(self.consume(tampered)[0], grpc.StatusCode.INVALID_ARGUMENT)  # SU-4 before N-1
        tampered.opaque_state = b"x" * 65537
        self.assertEqual(self.consume(tampered)[0], grpc.StatusCode.INVALID_ARGUMENT)  # L-1
        self.assertEqual(self.consume(ref)[0], grpc.StatusCode.OK)  # the original still works

    def test_roles_and_media(self):
        publish = encoder_pb2.EncoderOptions(publish=encoder_pb2.EncoderPublish())
        req = inference_pb2.GenerateRequest(media=[image("images/basn6a08.png")], encoder=publish)
        self.assertEqual(self.generate("pd", req)[0], grpc.StatusCode.FAILED_PRECONDITION)  # L-4
        self.assertEqual(self.generate("aggregated", req)[0], grpc.StatusCode.FAILED_PRECONDITION)
        self.assertEqual(self.generate("encoder", inference_pb2.GenerateRequest(prompt="hi"))[0], grpc.StatusCode.FAILED_PRECONDITION)
        video = common_pb2.MediaItem(modality=common_pb2.MODALITY_VIDEO, raw_bytes=read_bytes(os.path.join(FIXTURES, "images/video-001.png")))
        self.assertEqual(self.generate("encoder", inference_pb2.GenerateRequest(media=[video], encoder=publish))[0],
                         grpc.StatusCode.UNIMPLEMENTED)  # L-3
        for bad in ("malformed/truncated.png", "malformed/bomb.png", "malformed/truncated.jpeg", "images/triangle-001.gif"):
            with self.subTest(bad):
                req = inference_pb2.GenerateRequest(media=[image(bad)], encoder=publish)
                self.assertEqual(self.generate("encoder", req)[0], grpc.StatusCode.INVALID_ARGUMENT)  # L-6
        url = common_pb2.MediaItem(modality=common_pb2.MODALITY_IMAGE, url="http://127.0.0.1:1/x.png")
        self.assertEqual(self.generate("encoder", inference_pb2.GenerateRequest(media=[url], encoder=publish))[0],
                         grpc.StatusCode.UNIMPLEMENTED)

    def test_text_only_and_health(self):
        code, events = self.generate("pd", inference_pb2.GenerateRequest(prompt="hello there"))
        self.assertEqual(code, grpc.StatusCode.OK)
        self.assertEqual(self.answer(events)[1][0], 2)
        for role in self.engines:
            self.assertEqual(self.stub[role][1].Health(control_pb2.HealthRequest()).state, control_pb2.HEALTH_STATE_READY)
            self.assertEqual(self.stub[role][2].Check(health_pb2.HealthCheckRequest()).status,
                             health_pb2.HealthCheckResponse.SERVING)

    def test_s1_refusals(self):
        ctl = self.stub["pd"][1]
        for iid, want in (("", grpc.StatusCode.INVALID_ARGUMENT),
                          (self.engines["encoder"].instance_id, grpc.StatusCode.FAILED_PRECONDITION)):
            with self.assertRaises(grpc.RpcError) as cm:
                ctl.Shutdown(encoder_pb2.ShutdownRequest(expected_instance_id=iid))
            self.assertEqual(cm.exception.code(), want)
        self.assertEqual(ctl.Health(control_pb2.HealthRequest()).state, control_pb2.HEALTH_STATE_READY)

    def test_model_info_and_server_info(self):
        roles = {"encoder": encoder_pb2.ENCODER_ROLE_PRODUCER, "pd": encoder_pb2.ENCODER_ROLE_CONSUMER,
                 "aggregated": encoder_pb2.ENCODER_ROLE_NONE}
        for role, want in roles.items():
            info = self.stub[role][1].GetServerInfo(control_pb2.GetServerInfoRequest())
            self.assertEqual(info.schema_revision, 1)
            self.assertEqual(info.extra.fields["baton.preset"].string_value, "py-tiny")
            self.assertRegex(info.instance_id, r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
            m = self.stub[role][1].GetModelInfo(control_pb2.GetModelInfoRequest())
            self.assertEqual(m.encoder.role, want)
        load = self.stub["encoder"][1].GetLoad(control_pb2.GetLoadRequest())
        self.assertIn("encoder.exports.entries", load.attributes.fields)


class ModelTest(unittest.TestCase):
    def test_any_embedding_shape(self):
        m = lm.Model()
        seq = m.layout(lm.tokenize(PROMPT), 1)
        outs = set()
        for shape in ((196, 512), (49, 256), (1, 1), (3, 7)):
            emb = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
            h = m.prompt_state(seq, [emb], ["x%d" % sum(shape)])
            outs.add(tuple(t for t, _ in m.generate(h, 8)))
        self.assertEqual(len(outs), 4)

    def test_markers(self):
        m = lm.Model()
        self.assertEqual(m.layout(lm.tokenize("a b"), 2)[:2], [("image", 0), ("image", 1)])
        with self.assertRaises(ValueError):
            m.layout(lm.tokenize("<image> a <image>"), 1)


if __name__ == "__main__":
    unittest.main()
