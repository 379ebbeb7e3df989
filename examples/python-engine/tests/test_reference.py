"""The baton-json-v1 codec against fixtures/vectors/reference.json (docs/implementing.md 4.2)."""

import os
import unittest

import grpc

from common import load_json, vectors_dir
from pyengine import errors, reference

ACCEPTED_BACKENDS = ("shared_dir", "tcp")  # the vectors' rejections assume a consumer accepting both


def vectors():
    d = vectors_dir()
    if d is None:
        raise unittest.SkipTest("no fixtures/vectors/reference.json (set BATON_VECTORS_DIR)")
    return load_json(os.path.join(d, "reference.json"))


def endpoint(v):
    e = v.get("producer_endpoint")
    return None if e is None else (e["host"], e["port"], e["protocol"])


def consumer_verdict(opaque, backend, instance_id, ep, keys):
    """The consumer's checks in the CONTRACT order; returns (rule, code) of the first failure."""
    try:
        ref = reference.parse(opaque)
        if backend not in ACCEPTED_BACKENDS:
            raise errors.precondition("N-1", "backend")
        reference.check_ids(ref, instance_id)
        if instance_id not in keys:
            raise errors.invalid("SU-5", "no such instance")
        reference.verify(ref, keys[instance_id], backend, instance_id, ep)
    except errors.RuleError as e:
        return e.rule, e.code
    return None, grpc.StatusCode.OK


class VectorTest(unittest.TestCase):
    def test_vectors_seal_byte_for_byte(self):
        d = vectors()
        self.assertGreaterEqual(len(d["vectors"]), 3)
        for v in d["vectors"]:
            with self.subTest(v["name"]):
                key = bytes.fromhex(v["key_hex"])
                items = [reference.Item(i["hash"], i["rows"], i["cols"]) for i in v["items"]]
                body = reference.body_bytes(v["entry_id"], v["exp"], items)
                self.assertEqual(body, v["body"].encode())
                mac = reference.mac_input(v["backend"], v["producer_instance_id"], endpoint(v), body)
                self.assertEqual(mac.hex(), v["mac_input_hex"])
                self.assertEqual(reference.compute_tag(key, v["backend"], v["producer_instance_id"], endpoint(v), body), v["tag"])
                sealed = reference.seal(key, v["backend"], v["producer_instance_id"], endpoint(v), v["entry_id"], v["exp"], items)
                self.assertEqual(sealed, v["opaque_state"].encode())

    def test_vectors_parse_and_verify(self):
        for v in vectors()["vectors"]:
            with self.subTest(v["name"]):
                ref = reference.parse(v["opaque_state"].encode())
                self.assertEqual(ref.id, v["entry_id"])
                self.assertEqual(ref.exp, v["exp"])
                self.assertEqual([(i.hash, i.rows, i.cols) for i in ref.items], [(i["hash"], i["rows"], i["cols"]) for i in v["items"]])
                reference.check_ids(ref, v["producer_instance_id"])
                reference.verify(ref, bytes.fromhex(v["key_hex"]), v["backend"], v["producer_instance_id"], endpoint(v))

    def test_rejections_get_their_rule_and_code(self):
        d = vectors()
        v0 = d["vectors"][0]
        keys = {v0["producer_instance_id"]: bytes.fromhex(v0["key_hex"])}
        self.assertGreaterEqual(len(d["rejections"]), 15)
        for r in d["rejections"]:
            with self.subTest(r["name"]):
                ep = r.get("producer_endpoint", v0["producer_endpoint"])
                ep = (ep["host"], ep["port"], ep["protocol"])
                rule, code = consumer_verdict(r["opaque_state"].encode(), r.get("backend", v0["backend"]),
                                              r.get("producer_instance_id", v0["producer_instance_id"]), ep, keys)
                self.assertEqual(rule, r["rule"])
                self.assertEqual(code.name, r["code"])


class GrammarTest(unittest.TestCase):
    KEY = bytes(range(32))
    IID = "6f1c2a3b-4d5e-4f60-8172-93a4b5c6d7e8"
    EP = ("127.0.0.1", 50051, "grpc")

    def good(self, **kw):
        items = kw.pop("items", [reference.Item("ab" * 32, 4, 8)])
        return reference.seal(self.KEY, "shared_dir", self.IID, self.EP, kw.pop("id", "00" * 16), kw.pop("exp", 1), items)

    def rule_of(self, opaque):
        try:
            reference.parse(opaque)
        except errors.RuleError as e:
            return e.rule
        return None

    def test_every_single_byte_change_is_rejected(self):
        """Grammar (SU-4/H-3) or tag (SU-5): no edit of one byte goes through."""
        good = self.good()
        for i in range(len(good)):
            for b in (0x20, 0x22, 0x30, 0x61, 0x7b, good[i] ^ 1):
                bad = good[:i] + bytes([b]) + good[i + 1:]
                if bad == good:
                    continue
                try:
                    ref = reference.parse(bad)
                    reference.check_ids(ref, self.IID)
                    reference.verify(ref, self.KEY, "shared_dir", self.IID, self.EP)
                except errors.RuleError as e:
                    self.assertEqual(e.code, grpc.StatusCode.INVALID_ARGUMENT)
                    continue
                self.fail("byte %d -> %r accepted: %r" % (i, chr(b), bad))

    def test_limits(self):
        self.assertEqual(self.rule_of(b"x" * 65537), "L-1")
        self.assertEqual(self.rule_of(b" " * 65536), "SU-4")
        self.assertIsNone(self.rule_of(self.good(items=[reference.Item("", 1, 1)] * 64)))
        self.assertEqual(self.rule_of(self.good(items=[reference.Item("", 1, 1)] * 65)), "SU-4")
        self.assertEqual(self.rule_of(self.good(items=[reference.Item("", 8192, 8193)])), "SU-4")  # over 256 MiB
        self.assertIsNone(self.rule_of(self.good(items=[reference.Item("", 8192, 8192)])))
        self.assertEqual(self.rule_of(self.good(exp=1 << 63)), "SU-4")
        self.assertIsNone(self.rule_of(self.good(exp=-(1 << 63))))
        self.assertEqual(self.rule_of(self.good().replace(b'"exp":1,', b'"exp":-0,')), "SU-4")
        self.assertEqual(self.rule_of(self.good(items=[reference.Item("", 1, 1 << 32)])), "SU-4")
        self.assertEqual(self.rule_of(b"[" * 10000), "SU-4")  # deep nesting is just not the grammar

    def test_hash_forms(self):
        self.assertEqual(self.rule_of(self.good(items=[reference.Item("AB" * 32, 1, 1)])), "H-3")
        self.assertEqual(self.rule_of(self.good(items=[reference.Item("ab" * 31, 1, 1)])), "H-3")
        self.assertEqual(self.rule_of(self.good(items=[reference.Item("../x", 1, 1)])), "H-3")
        self.assertIsNone(self.rule_of(self.good(items=[reference.Item("", 1, 1)])))  # H-2: no hash

    def test_ids_that_are_not_ids(self):
        ref = reference.parse(self.good(id="../../../../etc/passwd"))
        with self.assertRaises(errors.RuleError) as cm:
            reference.check_ids(ref, self.IID)
        self.assertEqual(cm.exception.rule, "SU-5")
        ref = reference.parse(self.good())
        for iid in ("../x", self.IID.upper(), "", self.IID + "/", "/" + self.IID[1:]):
            with self.assertRaises(errors.RuleError, msg=iid):
                reference.check_ids(ref, iid)


if __name__ == "__main__":
    unittest.main()
