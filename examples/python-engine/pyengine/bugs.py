"""Seeded bugs: `--bug NAME` breaks exactly one decision of the engine.

Each bug declares the CONTRACT rules a correct harness must fail against an engine started
with it (`rules`), and nothing else (attribution): `run_bugs.py bugs` (make python-bugs)
checks that `baton check` fails exactly these rules. The decision each one breaks is marked
in the code by its name (grep for it).

`harness_also` lists rules that baton's harness is known to fail as well although the bug
does not break them (a case asserting another rule's condition); each says which case and
why. python-bugs accepts `rules` alone or `rules` plus these, and says which it saw, so the
table keeps working when the harness is fixed, and shows when it is. `harness_misses` lists
declared rules that the harness is known not to catch yet (a gap in its cases), with why.
"""

import collections

Bug = collections.namedtuple("Bug", "rules description harness_also harness_misses")
Bug.__new__.__defaults__ = ({},)

BUGS = {
    "consume-not-atomic": Bug(
        ("SU-1",),
        "the consumer reads an entry without claiming it by rename and deletes it only after generating, so "
        "concurrent consumes of one reference all get tokens", {}),
    "release-keeps-file": Bug(
        ("SU-2", "SU-3"),
        "the producer's Abort of a published entry answers ABORTED and forgets it but never claims or deletes its "
        "file, so the released reference still consumes (SU-2), and the ABORTED answer did not release (SU-3)", {}),
    "abort-aborted-twice": Bug(
        ("SU-3",),
        "Abort(encoder_cache) answers ABORTED without looking at the entry's state (released, consumed or expired)", {}),
    "malformed-internal": Bug(
        ("SU-4",),
        "a reference that fails the baton-json-v1 grammar is answered INTERNAL instead of INVALID_ARGUMENT",
        {"N-1": "case 'N-1 a reference for a backend the consumer does not accept': its step 'backend unlisted and "
                "opaque_state garbage: SU-4 decides before N-1' asserts SU-4's code (INVALID_ARGUMENT); N-1 did not decide",
         "SU-5": "case 'SU-5 path-like references': an opaque_state that is a path is not the declared baton-json-v1 "
                 "grammar, so SU-4 decides (precedence SU-4 before SU-5); the code asserted is SU-4's"}),
    "tag-unchecked": Bug(
        ("SU-5",),
        "the consumer never verifies the reference's HMAC tag, so an altered or forged reference consumes",
        {"SU-4": "case 'SU-4 malformed references are rejected by the consumer': its last variant keeps the grammar "
                 "(same length, the tag's digits altered) and only the tag can reject it: SU-5's condition",
         "H-3": "case 'H-3 a reference with a malformed content hash': its variant with items[0].hash empty is "
                "well-formed (an empty hash is H-2's missing hash, docs section 4.2), only the tag rejects it: SU-5"}),
    "tag-body-only": Bug(
        ("SU-5",),
        "producer and consumer compute the tag over the opaque state only, not over backend, producer_instance_id "
        "and producer_endpoint, so a reference with an altered outer field still consumes", {},
        {"SU-5": "no Core case alters producer_endpoint (or another outer field a consumer would still accept) "
                 "of a valid reference, though docs/implementing.md 4.1 lists outer-field alterations among "
                 "the format-agnostic SU-5 checks"}),
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
        "the consumer counts the image rows twice in prompt_tokens (the encoder's work billed again)",
        {"B-2": "case 'B-2 different images with one prompt': asserts E+PD usage equals the baseline's, which is "
                "B-1's condition (B-2 is about the tokens of two images)",
         "H-5": "case 'H-5 two images sent with one MediaItem.uuid': asserts E+PD usage equals the baseline's (B-1's)"}),
    "text-keyed-cache": Bug(
        ("B-2", "H-5"),
        "the prefix cache is keyed by the prompt's tokens with image positions as placeholders, not by content hash "
        "(B-2; and H-5's two images under one uuid share one prompt, so they collide too)", {}),
    "uuid-identity": Bug(
        ("H-5",),
        "an item's identity (its published content hash, its prefix-cache key) is derived from MediaItem.uuid when "
        "one is given", {}),
}


def rules_of(name):
    return tuple(BUGS[name].rules)
