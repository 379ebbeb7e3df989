"""Seeded bugs: `--bug NAME` breaks exactly one decision of the engine.

Each bug declares the CONTRACT rules a correct harness must fail against an engine whose
encoder and consumer run with it (`rules`), and the rules it may fail as a documented
consequence (`consequences`: rule -> why; each pair is one of baton's suite.Consequences),
and nothing else (attribution): `run_bugs.py bugs` (make python-bugs) checks that
`baton check` fails every rule of `rules` and no rule outside `rules` and `consequences`.
The aggregated baseline runs without the bug: it is the reference answer. The decision each
one breaks is marked in the code by its name (grep for it).
"""

import collections

Bug = collections.namedtuple("Bug", "rules description consequences")
Bug.__new__.__defaults__ = ({},)

BUGS = {
    "consume-not-atomic": Bug(
        ("SU-1",),
        "the consumer reads an entry without claiming it by rename and deletes it only after generating, so "
        "concurrent consumes of one reference all get tokens",
        {"SU-3": "a consume that does not claim also loses the race against the producer's own claim: Abort "
                 "answers ABORTED for an entry whose reference still got tokens (case 'SU-3 Abort raced against a "
                 "consume')"}),
    "release-keeps-file": Bug(
        ("SU-2", "SU-3"),
        "the producer's Abort of a published entry answers ABORTED and forgets it but never claims or deletes its "
        "file, so the released reference still consumes (SU-2), and the ABORTED answer did not release (SU-3)", {}),
    "abort-aborted-twice": Bug(
        ("SU-3",),
        "Abort(encoder_cache) answers ABORTED without looking at the entry's state (released, consumed or expired)", {}),
    "malformed-internal": Bug(
        ("SU-4",),
        "a reference that fails the baton-json-v1 grammar is answered INTERNAL instead of INVALID_ARGUMENT", {}),
    "tag-unchecked": Bug(
        ("SU-5",),
        "the consumer never verifies the reference's HMAC tag, so an altered or forged reference consumes", {}),
    "tag-body-only": Bug(
        ("SU-5",),
        "producer and consumer compute the tag over the opaque state only, not over backend, producer_instance_id "
        "and producer_endpoint, so a reference with an altered outer field still consumes", {}),
    "hash-length-internal": Bug(
        ("H-3",),
        "the consumer copies each content hash into a 32-byte buffer before checking its form; a hash of the wrong "
        "length (not 0, not 64 digits) escapes as INTERNAL", {}),
    "no-ref-bound": Bug(
        ("L-1",),
        "no 64 KiB bound on opaque_state: an oversize reference is parsed (trailing padding stripped) and consumed", {}),
    "video-as-image": Bug(
        ("L-3",), "video and audio items are decoded as images instead of being answered UNIMPLEMENTED", {}),
    "wrong-role-served": Bug(
        ("L-4",), "the consumer serves a publish (encodes and publishes) instead of answering FAILED_PRECONDITION", {}),
    "no-producer-quota": Bug(
        ("L-5",), "the producer never checks its byte quota, so publishes never end in RESOURCE_EXHAUSTED", {}),
    "png-crc-unchecked": Bug(
        ("L-6",), "the PNG decoder skips chunk CRCs, so a PNG with a bad CRC is published", {}),
    "any-backend": Bug(
        ("N-1",), "the consumer accepts a reference of any backend as if it were shared_dir", {}),
    "shutdown-code-swapped": Bug(
        ("S-1",), "Shutdown with another instance's id answers INVALID_ARGUMENT instead of FAILED_PRECONDITION", {}),
    "usage-counts-encoder": Bug(
        ("B-1",),
        "the consumer counts the image rows twice in prompt_tokens (the encoder's work billed again)", {}),
    "text-keyed-cache": Bug(
        ("B-2",),
        "the prefix cache is keyed by the prompt's tokens with image positions as placeholders, not by content hash, "
        "so two images under one prompt share an answer (H-5's case then finds the consumer cannot tell its two images "
        "apart even without a uuid, which is B-2's defect: H-5 is not verifiable there)",
        {"B-1": "cross-image reuse in the consumer's prefix cache also makes an E+PD answer differ from its baseline "
                "(the B-1 cases hand off images under one prompt)"}),
    "uuid-identity": Bug(
        ("H-5",),
        "an item's identity (its published content hash, its prefix-cache key) is derived from MediaItem.uuid when "
        "one is given", {}),
}


def rules_of(name):
    return tuple(BUGS[name].rules)
