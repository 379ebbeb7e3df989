"""Seeded bugs: `--bug NAME` breaks exactly one decision of the engine.

Each bug declares the CONTRACT rules a correct harness must fail when it runs against an
engine started with it, and nothing else (attribution); `run_bugs.py` (make python-bugs)
checks that `baton check` fails exactly these rules. The decision each one breaks is marked
in the code by its name (grep for it).
"""

BUGS = {
    # name: (rules, the broken decision)
    "consume-not-atomic": (("SU-1",), "the consumer reads an entry without claiming it by rename and deletes it only after generating, so concurrent consumes all succeed"),
    "release-keeps-file": (("SU-2",), "the producer's Abort answers ABORTED and forgets the entry but leaves its file, so a released reference still consumes"),
    "abort-aborted-twice": (("SU-3",), "Abort(encoder_cache) answers ABORTED whatever the entry's state (released, consumed or expired)"),
    "malformed-internal": (("SU-4",), "a reference that fails the baton-json-v1 grammar is answered INTERNAL instead of INVALID_ARGUMENT"),
    "tag-unchecked": (("SU-5",), "the consumer never verifies the reference's HMAC tag, so an altered or forged reference consumes"),
    "hash-parse-internal": (("H-3",), "the consumer hex-decodes content hashes before checking their form; a malformed one escapes as INTERNAL"),
    "no-ref-bound": (("L-1",), "no 64 KiB bound on opaque_state: an oversize reference is parsed (padding stripped) and consumed"),
    "video-as-image": (("L-3",), "video and audio items are decoded as images instead of being answered UNIMPLEMENTED"),
    "wrong-role-served": (("L-4",), "the consumer serves a publish (encodes and publishes) instead of answering FAILED_PRECONDITION"),
    "no-producer-quota": (("L-5",), "the producer never checks its byte quota, so publishes never end in RESOURCE_EXHAUSTED"),
    "png-crc-unchecked": (("L-6",), "the PNG decoder skips chunk CRCs, so a PNG with a bad CRC is published"),
    "any-backend": (("N-1",), "the consumer accepts a reference of any backend as if it were shared_dir"),
    "shutdown-code-swapped": (("S-1",), "Shutdown with another instance's id answers INVALID_ARGUMENT instead of FAILED_PRECONDITION"),
    "usage-counts-encoder": (("B-1",), "the consumer counts the image rows twice in prompt_tokens (the encoder's work billed again)"),
    "text-keyed-cache": (("B-2", "H-5"), "the prefix cache is keyed by the prompt's tokens with image positions as placeholders, not by content hash"),
    "uuid-identity": (("H-5",), "an item's identity (its published content hash, its prefix-cache key) is derived from MediaItem.uuid when one is given"),
}


def rules_of(name):
    return BUGS[name][0]
