"""The shared_dir backend on disk (docs/implementing.md 4.3) and its safetensors entries."""

import errno
import fcntl
import os
import shutil
import stat
import struct
import tempfile
import threading
import time
import unittest
import uuid

import grpc
import numpy as np

from common import load_json, read_bytes, vectors_dir, write_bytes
from pyengine import errors, reference, safetensors, shareddir
from openengine.v1 import common_pb2, encoder_pb2

EP = ("127.0.0.1", 7300, "grpc")


def quiet_log(*args, **kw):
    pass


def msg_ref(instance_id, opaque, backend="shared_dir", ep=EP):
    return encoder_pb2.EncoderCacheRef(backend=backend, producer_instance_id=instance_id,
                                       producer_endpoint=common_pb2.KvEndpoint(host=ep[0], port=ep[1], protocol=ep[2]),
                                       opaque_state=opaque)


class EntryVectorTest(unittest.TestCase):
    def vector(self):
        d = vectors_dir()
        if d is None:
            self.skipTest("no fixtures/vectors (set BATON_VECTORS_DIR)")
        with open(os.path.join(d, "entry.safetensors"), "rb") as f:
            return load_json(os.path.join(d, "entry.json")), f.read()

    def test_writer_is_byte_identical(self):
        v, data = self.vector()
        tensors = [(t["name"], np.array(t["values"], dtype=np.float32).reshape(t["shape"])) for t in v["tensors"]]
        out = safetensors.dumps(tensors, v["metadata"])
        self.assertEqual(len(out), v["file_bytes"])
        self.assertEqual(struct.unpack("<Q", out[:8])[0], v["header_length"])
        self.assertEqual(out[8:8 + v["header_length"]].decode(), v["header"])
        self.assertEqual(out, data)

    def test_reader(self):
        v, data = self.vector()
        meta, tensors = safetensors.loads(data)
        self.assertEqual(meta, v["metadata"])
        self.assertEqual([n for n, _ in tensors], ["item.0"])
        np.testing.assert_array_equal(tensors[0][1].reshape(-1), np.array(v["tensors"][0]["values"], dtype=np.float32))

    def test_consumer_reads_the_vector_entry(self):
        """The reference engine's own entry, at its place, claimed by our consumer."""
        v, data = self.vector()
        refs = load_json(os.path.join(vectors_dir(), "reference.json"))["vectors"][0]
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        d = os.path.join(root, refs["producer_instance_id"])
        os.mkdir(d, 0o700)
        with open(os.path.join(d, refs["entry_id"] + ".safetensors"), "wb") as f:
            f.write(data)
        c = shareddir.Consumer(root, 1 << 20, quiet_log)
        ref = reference.parse(refs["opaque_state"].encode())
        e = refs["producer_endpoint"]
        m = msg_ref(refs["producer_instance_id"], refs["opaque_state"].encode(), ep=(e["host"], e["port"], e["protocol"]))
        out = c.claim(ref, m)  # the vector's exp is in the past, so claim directly
        self.assertEqual(out[0].shape, (4, 8))
        self.assertEqual(float(out[0][0, 0]), -1.0)
        self.assertEqual(os.listdir(d), [])


class SafetensorsRejectTest(unittest.TestCase):
    def good(self):
        return safetensors.dumps([("item.0", np.zeros((2, 3), np.float32)), ("item.1", np.ones((1, 1), np.float32))],
                                 {"baton.entry_id": "x"})

    def header(self, text, data=b""):
        h = text.encode()
        return struct.pack("<Q", len(h)) + h + data

    def test_rejections(self):
        good = self.good()
        safetensors.loads(good)
        cases = {
            "short": good[:7],
            "header past the end": struct.pack("<Q", 1 << 30) + good[8:],
            "trailing byte": good + b"\x00",
            "missing byte": good[:-1],
            "duplicate key": self.header('{"a":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]},'
                                         '"a":{"dtype":"F32","shape":[1,1],"data_offsets":[4,8]}}', bytes(8)),
            "gap": self.header('{"a":{"dtype":"F32","shape":[1,1],"data_offsets":[4,8]}}', bytes(8)),
            "overlap": self.header('{"a":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]},'
                                   '"b":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]}}', bytes(4)),
            "F16": self.header('{"a":{"dtype":"F16","shape":[1,2],"data_offsets":[0,4]}}', bytes(4)),
            "3-D": self.header('{"a":{"dtype":"F32","shape":[1,1,1],"data_offsets":[0,4]}}', bytes(4)),
            "extra field": self.header('{"a":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4],"x":1}}', bytes(4)),
            "not JSON": self.header('{"a":', bytes(4)),
            "not UTF-8": struct.pack("<Q", 2) + b"\xff\xfe",
            "metadata not strings": self.header('{"__metadata__":{"a":1}}'),
            "deep": self.header("[" * 100000),
        }
        for name, data in cases.items():
            with self.subTest(name):
                with self.assertRaises(safetensors.SafetensorsError):
                    safetensors.loads(data)


class SharedDirTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.root, True)
        self.cache = os.path.join(self.root, "cache")
        self.iid = str(uuid.uuid4())
        self.p = shareddir.ProducerStore(self.cache, self.iid, "py-tiny", 1 << 20, quiet_log)
        self.addCleanup(self.p.close)
        self.c = shareddir.Consumer(self.cache, 1 << 20, quiet_log)

    def publish(self, ttl_ms=60000, rows=3, cols=5, seed=1):
        emb = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
        item = reference.Item("cd" * 32, rows, cols)
        size = rows * cols * 4
        self.p.reserve(size)
        opaque, exp = self.p.publish([item], [emb], ttl_ms, "shared_dir", EP, size)
        return opaque, emb

    def consume(self, opaque, **kw):
        m = msg_ref(self.iid, opaque, **kw)
        ref = reference.parse(opaque)
        self.c.check(ref, m)
        size = self.c.reserve(ref)
        try:
            return self.c.claim(ref, m)
        finally:
            self.c.unreserve(size)

    def rule(self, fn, *a, **kw):
        try:
            fn(*a, **kw)
        except errors.RuleError as e:
            return e.rule, e.code
        return None, grpc.StatusCode.OK

    def test_layout_and_modes(self):
        self.assertEqual(stat.S_IMODE(os.lstat(self.cache).st_mode), 0o700)
        d = os.path.join(self.cache, self.iid)
        self.assertEqual(stat.S_IMODE(os.lstat(d).st_mode), 0o700)
        self.assertEqual(sorted(os.listdir(d)), ["hmac.key", "lock"])
        for name in ("hmac.key", "lock"):
            self.assertEqual(stat.S_IMODE(os.lstat(os.path.join(d, name)).st_mode), 0o600)
        self.assertEqual(os.path.getsize(os.path.join(d, "hmac.key")), 32)
        fd = os.open(os.path.join(d, "lock"), os.O_RDONLY)
        try:
            with self.assertRaises(BlockingIOError):  # held by the live producer
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        opaque, _ = self.publish()
        ref = reference.parse(opaque)
        entry = os.path.join(d, ref.id + ".safetensors")
        self.assertEqual(stat.S_IMODE(os.lstat(entry).st_mode), 0o600)
        meta, _ = safetensors.loads(read_bytes(entry))
        self.assertEqual(meta["baton.entry_id"], ref.id)
        self.assertEqual(meta["baton.producer_instance_id"], self.iid)
        self.assertEqual(meta["baton.format"], "baton.encoder.v1/entry")
        self.assertEqual(meta["baton.items"], '[{"hash":"%s","rows":3,"cols":5}]' % ("cd" * 32))

    def test_existing_root_mode_is_kept(self):
        root = os.path.join(self.root, "shared")
        os.mkdir(root)
        os.chmod(root, 0o1777)
        p = shareddir.ProducerStore(root, str(uuid.uuid4()), "py-tiny", 0, quiet_log)
        p.close()
        self.assertEqual(stat.S_IMODE(os.lstat(root).st_mode), 0o1777)

    def test_consume_once(self):
        opaque, emb = self.publish()
        out = self.consume(opaque)
        np.testing.assert_array_equal(out[0], emb)
        self.assertEqual(self.rule(self.consume, opaque), ("SU-2", grpc.StatusCode.INVALID_ARGUMENT))
        self.assertEqual(self.p.release(reference.parse(opaque).id), "ALREADY_FINISHED")
        self.p.collect()
        self.assertEqual(self.p.stats(), (0, 0))

    def test_release_once(self):
        opaque, _ = self.publish()
        rid = reference.parse(opaque).id
        self.assertEqual(self.p.release(rid), "ABORTED")
        self.assertEqual(self.p.release(rid), "ALREADY_FINISHED")
        self.assertEqual(self.rule(self.consume, opaque), ("SU-2", grpc.StatusCode.INVALID_ARGUMENT))
        self.assertEqual(self.p.stats(), (0, 0))

    def test_release_during_removal_waits_for_its_outcome(self):
        # SU-2, SU-3: an Abort that finds another removal of its entry in progress (an
        # earlier release, its expiry, the drain) answers only once that removal ended:
        # ALREADY_FINISHED after it succeeded, FAILED (UNAVAILABLE, X-1) after it failed.
        for fails, want in ((False, "ALREADY_FINISHED"), (True, "FAILED")):
            opaque, _ = self.publish()
            rid = reference.parse(opaque).id
            entered, go = threading.Event(), threading.Event()
            real = self.p._claim_and_delete

            def held(entry_id, keep_file=False, fails=fails):
                entered.set()
                go.wait(10)
                if fails:
                    raise OSError(errno.EIO, "injected")
                return real(entry_id, keep_file)

            self.p._claim_and_delete = held
            first = {}
            t1 = threading.Thread(target=lambda: first.setdefault("r", self.p.release(rid, reason="expiry")))
            t1.start()
            self.assertTrue(entered.wait(10))
            second = {}
            t2 = threading.Thread(target=lambda: second.setdefault("r", self.p.release(rid)))
            t2.start()
            t2.join(0.2)
            self.assertTrue(t2.is_alive(), "the second release answered %r before the removal ended" % second)
            go.set()
            t1.join(10)
            t2.join(10)
            self.p._claim_and_delete = real
            self.assertEqual(second.get("r"), want, "fails=%s" % fails)

    def test_expiry(self):
        opaque, _ = self.publish(ttl_ms=1)
        time.sleep(0.005)  # the TTL is the subject here: let 1 ms pass
        self.assertEqual(self.rule(self.consume, opaque), ("SU-2", grpc.StatusCode.INVALID_ARGUMENT))
        self.p.collect()
        self.assertEqual(self.p.stats(), (0, 0))
        self.assertEqual([n for n in os.listdir(os.path.join(self.cache, self.iid)) if n.endswith(".safetensors")], [])

    def test_tampering_and_confinement(self):
        opaque, _ = self.publish()
        other = str(uuid.uuid4())
        cases = {
            "tag": opaque[:-3] + (b"0" if opaque[-3:-2] != b"0" else b"1") + opaque[-2:],
            "another instance": ("instance", other),
            "backend": ("backend", "tcp"),
            "endpoint": ("ep", ("127.0.0.1", 7301, "grpc")),
        }
        for name, change in cases.items():
            with self.subTest(name):
                kw = {}
                op = opaque
                m = msg_ref(self.iid, opaque)
                if isinstance(change, bytes):
                    op = change
                    m = msg_ref(self.iid, op)
                elif change[0] == "instance":
                    m = msg_ref(other, opaque)
                elif change[0] == "backend":
                    m = msg_ref(self.iid, opaque, backend="tcp")
                else:
                    m = msg_ref(self.iid, opaque, ep=change[1])
                ref = reference.parse(op)
                self.assertEqual(self.rule(self.c.check, ref, m), ("SU-5", grpc.StatusCode.INVALID_ARGUMENT))
        self.consume(opaque)  # the original still works

    def test_key_file_checks(self):
        opaque, _ = self.publish()
        key = os.path.join(self.cache, self.iid, "hmac.key")
        saved = read_bytes(key)
        for name, damage in (("mode 0644", lambda: os.chmod(key, 0o644)),
                             ("31 bytes", lambda: write_bytes(key, saved[:31])),
                             ("symlink", lambda: (os.unlink(key), os.symlink("/etc/hostname", key)))):
            with self.subTest(name):
                c = shareddir.Consumer(self.cache, 1 << 20, quiet_log)
                damage()
                self.assertEqual(self.rule(c.check, reference.parse(opaque), msg_ref(self.iid, opaque)),
                                 ("SU-5", grpc.StatusCode.INVALID_ARGUMENT))
                if os.path.islink(key):
                    os.unlink(key)
                write_bytes(key, saved)
                os.chmod(key, 0o600)

    def test_quotas(self):
        self.p.quota_bytes = 100
        self.assertEqual(self.rule(self.p.reserve, 101), ("L-5", grpc.StatusCode.RESOURCE_EXHAUSTED))
        self.p.reserve(100)
        self.p.unreserve(100)
        opaque, _ = self.publish(rows=5, cols=5)  # 100 bytes
        self.assertEqual(self.rule(self.p.reserve, 1), ("L-5", grpc.StatusCode.RESOURCE_EXHAUSTED))
        self.consume(opaque)
        self.p.reserve(100)  # collection noticed the consume and freed the bytes
        self.c.inflight_quota_bytes = 10
        self.assertEqual(self.rule(self.c.reserve, reference.parse(opaque)), ("L-5", grpc.StatusCode.RESOURCE_EXHAUSTED))

    def test_orphan_sweep(self):
        dead = os.path.join(self.cache, str(uuid.uuid4()))
        alive = os.path.join(self.cache, str(uuid.uuid4()))
        young = os.path.join(self.cache, str(uuid.uuid4()))
        old = os.path.join(self.cache, str(uuid.uuid4()))
        other = os.path.join(self.cache, "not-a-uuid")
        for d in (dead, alive, young, old, other):
            os.mkdir(d, 0o700)
            with open(os.path.join(d, "hmac.key"), "wb") as f:
                f.write(bytes(32))
        for d in (dead, alive, other):
            open(os.path.join(d, "lock"), "wb").close()
        fd = os.open(os.path.join(alive, "lock"), os.O_RDONLY)
        self.addCleanup(os.close, fd)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        t = time.time() - 3600
        os.utime(old, (t, t))
        self.assertEqual(self.p.sweep_orphans(), 2)
        self.assertFalse(os.path.exists(dead))
        self.assertFalse(os.path.exists(old))
        for d in (alive, young, other, os.path.join(self.cache, self.iid)):
            self.assertTrue(os.path.isdir(d), d)

    def test_close_leaves_nothing(self):
        self.publish()
        self.publish(seed=2)
        opaque, _ = self.publish(seed=3)
        self.consume(opaque)
        self.assertTrue(self.p.close())
        self.assertEqual(os.listdir(self.cache), [])


if __name__ == "__main__":
    unittest.main()
