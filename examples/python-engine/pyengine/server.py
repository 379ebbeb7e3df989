"""The engine: openengine.v1 Inference and Control, grpc.health.v1, roles encoder | pd | aggregated.

One process serves one role over the shared_dir backend (E+PD topology):
- encoder (E): decodes and encodes images, publishes them (EncoderReady), never generates.
- pd: consumes a reference (claims the entry in the shared directory) and generates tokens.
- aggregated: decodes, encodes and generates in one process: the B-1 baseline.

Every rejection is a RuleError raised in CONTRACT "which code wins" order (health refusals,
L-4, L-6, L-1, SU-4, H-3, N-1, SE-3, SU-5, SU-2, L-5) and answered as a non-OK status before
any event; failures after the stream was accepted are one terminal EngineError, then OK.
"""

import hashlib
import json
import os
import signal
import sys
import threading
import time
import uuid
from concurrent import futures

import grpc
from google.protobuf import struct_pb2

from grpc_health_v1 import health_pb2, health_pb2_grpc
from openengine.v1 import common_pb2, control_pb2, control_pb2_grpc, encoder_pb2, inference_pb2, inference_pb2_grpc

from . import bugs as bugs_mod
from . import contenthash, errors, lm, media, reference, shareddir
from .encoder import Encoder
from .errors import RuleError

ENGINE_NAME = "baton-py-engine"
ENGINE_VERSION = "0.1.0"
MODEL_ID = "baton-py/toy-vlm-1"
BACKENDS = ("shared_dir",)
MAX_ITEMS = 64
DEFAULT_MAX_TOKENS = 16
MAX_OUTPUT_TOKENS = 4096
MAX_CONTEXT = 65536
MAX_DECODE_PREP = 2 << 20
MiB = 1 << 20
LINGER_S = 0.5  # after a drain, before the listener closes

HOOKS = {
    # key: (kind, lo, hi)  CONTRACT section 4
    "baton.encoder_delay_ms": ("number", 0, 60000),
    "baton.encoder_fail": ("bool", None, None),
    "baton.context_delay_ms": ("number", 0, 60000),
    "baton.cleanup_fail": ("bool", None, None),
    "baton.transfer_fail": ("bool", None, None),
    "baton.preempt_after_tokens": ("integer", 1, 4096),
    "baton.preempt_mode": ("enum", ("pause", "reset"), None),
    "baton.omit_content_hash": ("bool", None, None),
}


class Log:
    """JSON lines on stderr: ts, level, msg, and fields (rule, code, request_id, ...)."""

    LEVELS = {"debug": 0, "info": 1, "warn": 2, "error": 3}

    def __init__(self, role, level="info"):
        self.role = role
        self.min = self.LEVELS[level]
        self._lock = threading.Lock()

    def __call__(self, level, msg, **fields):
        if self.LEVELS[level] < self.min:
            return
        rec = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z", "level": level, "role": self.role, "msg": msg}
        rec.update(fields)
        with self._lock:
            sys.stderr.write(json.dumps(rec, default=str) + "\n")
            sys.stderr.flush()


class Live:
    """One running Generate request (for Abort and the drain)."""

    def __init__(self, request_id):
        self.request_id = request_id
        self.cancelled = threading.Event()


class Engine:
    def __init__(self, cfg):
        self.cfg = cfg
        self.role = cfg.role
        self.instance_id = str(uuid.uuid4())  # lowercase UUID, fresh at every start
        self.bugs = frozenset(cfg.bug or ())
        for b in self.bugs:
            if b not in bugs_mod.BUGS:
                raise ValueError("unknown --bug %r (have %s)" % (b, ", ".join(sorted(bugs_mod.BUGS))))
        self.log = Log(cfg.role, cfg.log_level)
        self.limits = media.Limits()
        self.preset = cfg.preset
        # The seeded bug `wrong-role-served` lets a consumer publish: it gets an encoder and a store.
        publishes = self.role == "encoder" or (self.role == "pd" and "wrong-role-served" in self.bugs)
        self.encoder = Encoder(cfg.preset) if publishes or self.role == "aggregated" else None
        self.model = lm.Model() if self.role in ("pd", "aggregated") else None
        self.store = None
        self.consumer = None
        if publishes:
            if not cfg.cache_dir:
                raise ValueError("--cache-dir is required for --role %s" % self.role)
            self.store = shareddir.ProducerStore(cfg.cache_dir, self.instance_id, self.preset,
                                                 cfg.producer_quota_bytes, self.log, self.bugs)
        if self.role == "pd":
            if not cfg.cache_dir:
                raise ValueError("--cache-dir is required for --role pd")
            self.consumer = shareddir.Consumer(cfg.cache_dir, cfg.consumer_quota_bytes, self.log, self.bugs)
        self.endpoint = None  # (host, port, "grpc"), set once bound
        self._lock = threading.Condition()
        self.draining = False
        self.live = {}  # id(Live) -> Live
        self.running = 0
        self.live_storages = 0  # encoder outputs alive in memory (GetLoad encoder.storage.live_batches)
        self.shutdown_requested = threading.Event()
        self.drain_timeout_ms = cfg.drain_timeout_ms

    # --- health ----------------------------------------------------------------------------

    def cleanup_failures(self):
        out = []
        if self.store is not None:
            out += self.store.cleanup_failures
        if self.consumer is not None:
            out += self.consumer.cleanup_failures
        return out

    def health(self):
        """(state, checks): DRAINING while draining, NOT_READY after a failed cleanup (X-1)."""
        failures = self.cleanup_failures()
        checks = []
        if self.draining:
            state = control_pb2.HEALTH_STATE_DRAINING
            checks.append(control_pb2.HealthCheck(name="lifecycle", state=state, message="draining (shutdown accepted)"))
        else:
            state = control_pb2.HEALTH_STATE_READY
            checks.append(control_pb2.HealthCheck(name="lifecycle", state=state, message="serving"))
        if failures:
            cs = control_pb2.HEALTH_STATE_NOT_READY
            checks.append(control_pb2.HealthCheck(name="encoder_cache", state=cs, message="X-1: " + failures[0]))
            if state == control_pb2.HEALTH_STATE_READY:
                state = cs
        else:
            checks.append(control_pb2.HealthCheck(name="encoder_cache", state=control_pb2.HEALTH_STATE_READY,
                                                  message="nothing quarantined"))
        return state, checks

    # --- admission -------------------------------------------------------------------------

    def _hooks(self, req):
        """Type-checks every baton.* hook (always); returns those honoured (only with --test-hooks)."""
        out = {}
        if not req.HasField("extra"):
            return out
        for key, value in req.extra.fields.items():
            if key not in HOOKS:
                continue
            kind, lo, hi = HOOKS[key]
            which = value.WhichOneof("kind")
            if kind in ("number", "integer"):
                if which != "number_value":
                    raise errors.invalid("none", "%s must be a number" % key)
                v = value.number_value
                if kind == "integer" and v != int(v):
                    raise errors.invalid("none", "%s must be an integer" % key)
                if not lo <= v <= hi:
                    raise errors.invalid("none", "%s must be in %s..%s" % (key, lo, hi))
            elif kind == "bool":
                if which != "bool_value":
                    raise errors.invalid("none", "%s must be a bool" % key)
                v = value.bool_value
            else:
                if which != "string_value" or value.string_value not in lo:
                    raise errors.invalid("none", "%s must be one of %s" % (key, ", ".join(lo)))
                v = value.string_value
            out[key] = v
        return out if self.cfg.test_hooks else {}

    def _check_role(self, req, mode):
        """L-4: FAILED_PRECONDITION for a request this role does not serve."""
        has_media = len(req.media) > 0
        if req.kv.HasField("session"):
            raise errors.precondition("L-4", "a KV-session decode request sent to a %s engine (no decode role here)" % self.role)
        if req.decode_preparation:
            raise errors.precondition("L-4", "a decode preparation sent to a %s engine (no decode role here)" % self.role)
        if self.role == "encoder":
            if mode == "consume":
                raise errors.precondition("L-4", "a reference sent to the encoder (E only publishes)")
            if mode != "publish":
                raise errors.precondition("L-4", "the encoder only publishes (encoder.publish with image media)")
        elif self.role == "pd":
            if mode == "publish" and "wrong-role-served" not in self.bugs:
                raise errors.precondition("L-4", "a publish sent to a consumer")
            if mode is None and has_media:
                raise errors.precondition("L-4", "this consumer requires the encoder handoff: send media to E, then the reference here")
            if mode == "consume" and has_media:
                raise errors.precondition("L-4", "a consume request carries media; a consumer takes the reference only")
        else:  # aggregated
            if mode is not None:
                raise errors.precondition("L-4", "an encoder handoff request sent to an aggregated engine (encoder role NONE)")

    def _check_media(self, req):
        """L-3 (video, audio: UNIMPLEMENTED) for every item, then L-6 (bounds, strict decode)."""
        if len(req.media) > MAX_ITEMS:
            raise errors.invalid("L-6", "%d media items (at most %d)" % (len(req.media), MAX_ITEMS))
        for k, item in enumerate(req.media):
            if item.modality in (common_pb2.MODALITY_VIDEO, common_pb2.MODALITY_AUDIO) and "video-as-image" not in self.bugs:
                raise errors.unimplemented("L-3", "item %d: %s is not supported" % (k, common_pb2.Modality.Name(item.modality)))
        images = []
        for k, item in enumerate(req.media):
            try:
                images.append(media.decode_item(item, self.limits, lenient_png_crc="png-crc-unchecked" in self.bugs))
            except RuleError as e:
                e.message = "item %d: %s" % (k, e.message)
                raise
        return images

    def _prompt_ids(self, req):
        which = req.WhichOneof("input")
        if which == "token_ids":
            ids = list(req.token_ids.ids)
            if any(t >= lm.VOCAB for t in ids):
                raise errors.invalid("none", "token id out of the vocabulary (%d)" % lm.VOCAB)
            return ids
        return lm.tokenize(req.prompt if which == "prompt" else "")

    def _layout(self, req, n_items):
        ids = self._prompt_ids(req)
        try:
            seq = self.model.layout(ids, n_items)
        except ValueError as e:
            raise errors.invalid("none", str(e))
        text_tokens = sum(1 for kind, _ in seq if kind == "text")
        if len(seq) > MAX_CONTEXT:
            raise errors.invalid("none", "prompt of %d positions is over the context of %d" % (len(seq), MAX_CONTEXT))
        return seq, text_tokens

    def _stopping(self, req):
        s = req.stopping
        max_tokens = s.max_tokens if s.HasField("max_tokens") else DEFAULT_MAX_TOKENS
        max_tokens = min(max_tokens, MAX_OUTPUT_TOKENS)
        stop_ids = tuple(c.stop_token_id for c in s.conditions if c.WhichOneof("condition") == "stop_token_id")
        return max_tokens, stop_ids

    def admit(self, req):
        """All checks, in the CONTRACT order; returns a generator of responses (the run)."""
        with self._lock:
            draining = self.draining
        if draining:
            raise errors.unavailable("S-2", "draining: this engine accepts no new requests")
        failures = self.cleanup_failures()
        if failures:
            raise errors.unavailable("X-1", "an earlier cleanup failed: " + failures[0])
        if req.model and req.model != MODEL_ID:
            raise RuleError(grpc.StatusCode.NOT_FOUND, "none", "model %r is not served here (%s)" % (req.model, MODEL_ID))
        mode = req.encoder.WhichOneof("mode") if req.HasField("encoder") else None
        self._check_role(req, mode)
        hooks = self._hooks(req)
        if self.role == "encoder" or (self.role == "pd" and mode == "publish"):
            images = self._check_media(req)
            if not images:
                raise errors.invalid("none", "a publish without image media")
            return self._run_publish(req, images, hooks)
        if self.role == "aggregated":
            images = self._check_media(req)
            seq, text_tokens = self._layout(req, len(images))
            return self._run_aggregated(req, images, seq, text_tokens, hooks)
        # pd
        if mode is None:
            seq, text_tokens = self._layout(req, 0)
            return self._run_generate(req, seq, text_tokens, [], [], hooks)
        return self._admit_consume(req, hooks)

    def _admit_consume(self, req, hooks):
        msg_ref = req.encoder.consume
        if "no-ref-bound" not in self.bugs:
            reference.check_size(msg_ref.opaque_state)  # L-1, on the length alone
        try:
            if "no-ref-bound" in self.bugs:
                ref = _parse_unbounded(msg_ref.opaque_state)
            elif "hash-length-internal" in self.bugs:
                ref = reference.parse(msg_ref.opaque_state, check_hashes=False)
                for it in ref.items:
                    if it.hash and len(it.hash) != 64:  # seeded bug: a fixed-size copy, unchecked
                        raise RuleError(grpc.StatusCode.INTERNAL, "H-3", "content hash: buffer overrun (%d digits)" % len(it.hash))
                reference.parse(msg_ref.opaque_state)
            else:
                ref = reference.parse(msg_ref.opaque_state)
        except RuleError as e:
            if e.rule == "SU-4" and "malformed-internal" in self.bugs:
                raise RuleError(grpc.StatusCode.INTERNAL, "SU-4", "parse error: " + e.message)
            raise
        if msg_ref.backend not in BACKENDS and "any-backend" not in self.bugs:
            raise errors.precondition("N-1", "backend %r is not accepted here (accepted: %s)" % (msg_ref.backend, ", ".join(BACKENDS)))
        self.consumer.check(ref, msg_ref)  # SU-5, SU-2 (expiry, lstat)
        seq, text_tokens = self._layout(req, len(ref.items))
        size = self.consumer.reserve(ref)  # L-5, in-flight bytes
        try:
            embeddings = self.consumer.claim(ref, msg_ref, keep_file="consume-not-atomic" in self.bugs)
        except BaseException:
            self.consumer.unreserve(size)
            raise
        if "consume-not-atomic" in self.bugs:
            # Seeded bug: the entry is deleted after the generation, not claimed before it.
            path = self.consumer.entry_path(ref, msg_ref)
            on_done = lambda: shareddir._unlink_missing_ok(path)  # noqa: E731
        else:
            on_done = None
        identities = [it.hash or lm.fresh_identity() for it in ref.items]  # H-2
        return self._run_generate(req, seq, text_tokens, embeddings, identities, hooks,
                                  release=lambda: self.consumer.unreserve(size), on_done=on_done)

    # --- runs --------------------------------------------------------------------------------

    def _identity(self, image, item, preset):
        if "uuid-identity" in self.bugs and item.uuid:
            return hashlib.sha256(("uuid:" + item.uuid).encode()).hexdigest()  # seeded bug
        return contenthash.content_hash(preset, image.width, image.height, image.pixels)

    def _storage(self, delta):
        with self._lock:
            self.live_storages += delta

    def _hold(self, ms, context):
        """A test-hook hold; returns False when the client went away meanwhile."""
        end = time.monotonic() + ms / 1000.0
        while time.monotonic() < end:
            if context is not None and not context.is_active():
                return False
            time.sleep(min(0.01, max(0.0, end - time.monotonic())))
        return context is None or context.is_active()

    def _encoder_step(self, images, hooks, context):
        """Encodes the images: float32 [rows, cols] each, or None if the client left during a
        held step (encoder_delay_ms). Raises RuntimeError for a failed step (encoder_fail).
        On success the caller owns one live storage (GetLoad encoder.storage.live_batches)
        and gives it back with self._storage(-1) once the embeddings are dropped."""
        self._storage(+1)
        ok = False
        try:
            delay = hooks.get("baton.encoder_delay_ms", 0)
            if delay and not self._hold(delay, context):
                return None
            if hooks.get("baton.encoder_fail"):
                raise RuntimeError("encoder step failed (test hook baton.encoder_fail)")
            out = [self.encoder.encode(im.pixels) for im in images]
            ok = True
            return out
        finally:
            if not ok:
                self._storage(-1)

    def _run_publish(self, req, images, hooks):
        items = []
        for im, item in zip(images, req.media):
            h = "" if hooks.get("baton.omit_content_hash") else self._identity(im, item, self.preset)
            items.append(reference.Item(h, self.encoder.rows, self.encoder.cols))
        size = len(images) * self.encoder.item_bytes()
        self.store.reserve(size)  # L-5, before anything is written
        ttl = req.encoder.publish.ttl_ms if req.encoder.publish.HasField("ttl_ms") and req.encoder.publish.ttl_ms else self.cfg.ttl_ms

        def run(context):
            reserved = True  # the L-5 reservation is ours until publish() takes it over
            try:
                try:
                    embeddings = self._encoder_step(images, hooks, context)
                except RuntimeError as e:
                    yield self._error(req, common_pb2.ERROR_CODE_INTERNAL, str(e), retryable=True)  # C-6
                    return
                if embeddings is None:  # cancelled while the step was held (C-1)
                    return
                try:
                    delay = hooks.get("baton.context_delay_ms", 0)
                    if delay and not self._hold(delay, context):
                        return  # cancelled once its output was ready: nothing published (C-3)
                    reserved = False
                    opaque, exp = self.store.publish(items, embeddings, ttl, "shared_dir", self.endpoint, size,
                                                     fail_first_removal=bool(hooks.get("baton.cleanup_fail")))
                finally:
                    self._storage(-1)  # the entry file holds the embeddings now, or nothing does
            finally:
                if reserved:
                    self.store.unreserve(size)
            entry_id = reference.parse(opaque).id
            ready = encoder_pb2.EncoderReady(
                ref=encoder_pb2.EncoderCacheRef(
                    backend="shared_dir", producer_instance_id=self.instance_id,
                    producer_endpoint=common_pb2.KvEndpoint(host=self.endpoint[0], port=self.endpoint[1], protocol=self.endpoint[2]),
                    opaque_state=opaque),
                items=[encoder_pb2.EncodedItem(content_hash=it.hash, embedding_rows=it.rows, modality=common_pb2.MODALITY_IMAGE)
                       for it in items])
            if context is not None and not context.is_active():
                self.store.release(entry_id)  # C-7: cancelled before the send
                return
            try:
                yield inference_pb2.GenerateResponse(request_id=req.request_id, encoder_ready=ready, usage=common_pb2.Usage())
            except GeneratorExit:
                self.store.release(entry_id)  # C-7: the client left before the send completed
                raise
            if context is not None and not context.is_active():
                self.store.release(entry_id)  # C-7: cancelled, observed after the send
        return run

    def _run_aggregated(self, req, images, seq, text_tokens, hooks):
        identities = [self._identity(im, item, self.preset) for im, item in zip(images, req.media)]

        def run(context):
            if not images:
                yield from self._run_generate(req, seq, text_tokens, [], identities, hooks)(context)
                return
            embeddings = self._encoder_step(images, hooks, context)
            if embeddings is None:
                return
            yield from self._run_generate(req, seq, text_tokens, embeddings, identities, hooks,
                                          storage=True)(context)
        return run

    def _run_generate(self, req, seq, text_tokens, embeddings, identities, hooks, release=None, on_done=None,
                      storage=False):
        """The language side. storage: this request owns a live encoder storage (aggregated),
        given back at its first context step (prompt_state) or when it ends before it."""
        max_tokens, stop_ids = self._stopping(req)
        use_cache = not (req.kv.HasField("bypass_prefix_cache") and req.kv.bypass_prefix_cache)
        key = None
        if "text-keyed-cache" in self.bugs:
            key = tuple(t if kind == "text" else lm.IMAGE_TOKEN for kind, t in seq)
        if req.kv.HasField("cache_salt") and key is None:
            key = (("salt", req.kv.cache_salt),) + tuple(t if kind == "text" else ("image", identities[t]) for kind, t in seq)
        prompt_tokens = text_tokens + sum(int(e.shape[0]) for e in embeddings)
        if "usage-counts-encoder" in self.bugs and self.role == "pd":
            prompt_tokens += sum(int(e.shape[0]) for e in embeddings)  # seeded bug: E's work counted again

        def run(context):
            holds_storage = storage
            try:
                delay = hooks.get("baton.context_delay_ms", 0)
                if delay and not self._hold(delay, context):
                    return  # cancelled before its first context step (C-3)
                h = self.model.prompt_state(seq, embeddings, identities, use_cache=use_cache, cache_key_override=key)
                if holds_storage:
                    holds_storage = False
                    self._storage(-1)
                n = 0
                reason = common_pb2.FINISH_REASON_LENGTH
                for tid, stopped in self.model.generate(h, max_tokens, stop_ids):
                    if self._cancelled(context):
                        reason = common_pb2.FINISH_REASON_CANCELLED
                        break
                    n += 1
                    yield inference_pb2.GenerateResponse(
                        request_id=req.request_id,
                        token=inference_pb2.TokenOutput(tokens=[inference_pb2.TokenInfo(token_id=tid, token=lm.token_text(tid))],
                                                        text=lm.token_text(tid)))
                    if stopped:
                        reason = common_pb2.FINISH_REASON_STOP
                        break
                yield inference_pb2.GenerateResponse(
                    request_id=req.request_id,
                    finished=inference_pb2.GenerationFinished(reason=reason),
                    usage=common_pb2.Usage(prompt_tokens=prompt_tokens, completion_tokens=n, total_tokens=prompt_tokens + n))
            finally:
                if holds_storage:
                    self._storage(-1)
                if release is not None:
                    release()
                if on_done is not None:
                    on_done()
        return run

    def _cancelled(self, context):
        live = getattr(context, "_baton_live", None) if context is not None else None
        return (live is not None and live.cancelled.is_set()) or (context is not None and not context.is_active())

    def _error(self, req, code, message, retryable=False):
        return inference_pb2.GenerateResponse(
            request_id=req.request_id,
            error=common_pb2.EngineError(code=code, message=message, retryable=retryable),
            usage=common_pb2.Usage())

    # --- Abort -------------------------------------------------------------------------------

    def abort_encoder_cache(self, msg_ref):
        if self.role != "encoder":
            raise errors.precondition("L-4", "Abort(encoder_cache) goes to the producer (this is a %s engine)" % self.role)
        reference.check_size(msg_ref.opaque_state)
        try:
            ref = reference.parse(msg_ref.opaque_state)
        except RuleError as e:
            if e.rule == "SU-4" and "malformed-internal" in self.bugs:
                raise RuleError(grpc.StatusCode.INTERNAL, "SU-4", "parse error: " + e.message)
            raise
        reference.check_ids(ref, msg_ref.producer_instance_id)
        if msg_ref.producer_instance_id != self.instance_id:
            raise errors.invalid("SU-5", "the reference names another producer instance")
        reference.verify(ref, self.store.key, msg_ref.backend, msg_ref.producer_instance_id, reference.endpoint_of(msg_ref),
                         body_only="tag-body-only" in self.bugs)
        if shareddir.now_ms() >= ref.exp:
            self.store.release(ref.id, reason="expiry")
            return control_pb2.ABORT_STATUS_ALREADY_FINISHED, "expired"
        outcome = self.store.release(ref.id)
        if outcome == "FAILED":
            raise errors.unavailable("X-1", "the entry's removal failed; its storage may still exist")
        if outcome == "ABORTED":
            return control_pb2.ABORT_STATUS_ABORTED, "released"
        return control_pb2.ABORT_STATUS_ALREADY_FINISHED, "already consumed, released or expired"

    def abort_requests(self, request_id=None):
        with self._lock:
            targets = [l for l in self.live.values() if request_id is None or l.request_id == request_id]
        live = [l for l in targets if not l.cancelled.is_set()]
        for l in live:
            l.cancelled.set()
        return control_pb2.ABORT_STATUS_ABORTED if live else control_pb2.ABORT_STATUS_ALREADY_FINISHED

    # --- drain ---------------------------------------------------------------------------------

    def start_drain(self, timeout_ms=None):
        """S-1/S-2: returns False when already draining."""
        with self._lock:
            if self.draining:
                return False
            self.draining = True
            if timeout_ms:
                self.drain_timeout_ms = timeout_ms
            self._lock.notify_all()
        self.shutdown_requested.set()
        return True

    def drain(self):
        """Waits for in-flight requests (cancels them at the deadline), releases every entry,
        removes the instance directory. Returns True for a clean drain (S-4)."""
        deadline = time.monotonic() + self.drain_timeout_ms / 1000.0
        clean = True
        with self._lock:
            while self.running and time.monotonic() < deadline:
                self._lock.wait(timeout=max(0.0, min(0.05, deadline - time.monotonic())))
            left = self.running
        if left:
            clean = False
            self.log("warn", "drain deadline passed; cancelling in-flight requests", running=left)
            self.abort_requests()
            with self._lock:
                end = time.monotonic() + 2.0
                while self.running and time.monotonic() < end:
                    self._lock.wait(timeout=0.05)
        if self.store is not None:
            clean = self.store.close() and clean
        if self.cleanup_failures():
            clean = False
        return clean


def _parse_unbounded(opaque):
    """Seeded bug `no-ref-bound`: the L-1 bound is skipped; a padded reference is then parsed
    with the padding (trailing spaces) stripped, as a lenient parser would."""
    return reference.parse(bytes(opaque).rstrip(b" \t\r\n"), check_hashes=True) if len(opaque) > reference.MAX_BYTES \
        else reference.parse(opaque)


class InferenceServicer(inference_pb2_grpc.InferenceServicer):
    def __init__(self, engine):
        self.e = engine

    def Generate(self, request, context):
        e = self.e
        live = Live(request.request_id)
        context._baton_live = live
        with e._lock:
            e.live[id(live)] = live
            e.running += 1
        sent = False
        try:
            try:
                run = e.admit(request)
                for resp in run(context):
                    sent = True
                    yield resp
            except RuleError as err:
                # Raised only before the first event (admission, the L-5 reservation, the claim).
                e.log("info", "request rejected", rule=err.rule, code=err.code.name, request_id=request.request_id,
                      error=err.message)
                context.abort(err.code, err.details())
            except GeneratorExit:
                raise
            except Exception as err:  # a bug of ours: never an UNKNOWN status, never a dead engine
                e.log("error", "request failed", rule="none", code="INTERNAL", request_id=request.request_id, error=repr(err))
                if sent:
                    yield e._error(request, common_pb2.ERROR_CODE_INTERNAL, "internal error: %r" % err)
                else:
                    context.abort(grpc.StatusCode.INTERNAL, "internal error: %r" % err)
        finally:
            with e._lock:
                e.live.pop(id(live), None)
                e.running -= 1
                e._lock.notify_all()


class ControlServicer(control_pb2_grpc.ControlServicer):
    def __init__(self, engine):
        self.e = engine

    def GetServerInfo(self, request, context):
        e = self.e
        extra = struct_pb2.Struct()
        extra.update({"baton.preset": e.preset, "baton.profile": "baton.encoder.v1",
                      "baton.reference_format": "baton-json-v1", "baton.role": e.role,
                      "baton.implementation": "python (examples/python-engine)"})
        return control_pb2.ServerInfo(
            engine_name=ENGINE_NAME, engine_version=ENGINE_VERSION, engine_role=common_pb2.ENGINE_ROLE_AGGREGATED,
            instance_id=e.instance_id, supported_models=[MODEL_ID], schema_revision=1, minimum_client_revision=1,
            schema_release="openengine.v1+baton.encoder.v1", extra=extra)

    def GetModelInfo(self, request, context):
        e = self.e
        if request.model and request.model != MODEL_ID:
            context.abort(grpc.StatusCode.NOT_FOUND, "model %r is not served here (%s)" % (request.model, MODEL_ID))
        role = {"encoder": encoder_pb2.ENCODER_ROLE_PRODUCER, "pd": encoder_pb2.ENCODER_ROLE_CONSUMER,
                "aggregated": encoder_pb2.ENCODER_ROLE_NONE}[e.role]
        caps = encoder_pb2.EncoderCapabilities(
            role=role, backends=list(BACKENDS) if e.role != "aggregated" else [],
            max_reference_bytes=reference.MAX_BYTES, max_decode_preparation_bytes=MAX_DECODE_PREP,
            modalities=[common_pb2.MODALITY_IMAGE])
        if e.role == "encoder":
            caps.supports_abort_cleanup = True
        if e.role == "pd":
            caps.requires_handoff = True
        extra = struct_pb2.Struct()
        extra.update({"baton.preset": e.preset})
        return control_pb2.ModelInfo(
            model_id=MODEL_ID, served_model_name=MODEL_ID, max_context_length=MAX_CONTEXT,
            max_output_tokens=MAX_OUTPUT_TOKENS, tokenizer_modes=["text", "token_ids"], supports_text_input=True,
            supports_token_ids_input=True,
            generation=control_pb2.GenerationConfig(eos_token_ids=[1], default_max_tokens=DEFAULT_MAX_TOKENS),
            supports_lora=False, supports_multimodal=True, extra=extra, encoder=caps)

    def GetLoad(self, request, context):
        e = self.e
        entries = held = 0
        if e.store is not None:
            e.store.collect()
            entries, held = e.store.stats()
        with e._lock:
            running = e.running
            storages = e.live_storages
        attrs = struct_pb2.Struct()
        attrs.update({
            "encoder.exports.entries": entries,
            "encoder.exports.bytes": held,
            "encoder.receives.inflight": e.consumer.inflight if e.consumer is not None else 0,
            "encoder.quarantine.buffers": 0,  # shared_dir: no transfer, nothing is ever quarantined
            "encoder.quarantine.bytes": 0,
            "encoder.cleanup.pending": 0,  # releases run inline; nothing is left pending
            "encoder.storage.live_batches": storages,
        })
        return control_pb2.LoadInfo(instance_id=e.instance_id, timestamp_unix_nanos=time.time_ns(),
                                    running_requests=running, queued_requests=0, attributes=attrs)

    def Health(self, request, context):
        state, checks = self.e.health()
        return control_pb2.HealthResponse(state=state, checks=checks)

    def Abort(self, request, context):
        e = self.e
        which = request.WhichOneof("target")
        try:
            if which == "encoder_cache":
                status, msg = e.abort_encoder_cache(request.encoder_cache)
            elif which == "request_id":
                status, msg = e.abort_requests(request.request_id), "request " + request.request_id
            elif which == "all_requests":
                status, msg = e.abort_requests(), "all requests"
            elif which == "kv_session":
                status, msg = control_pb2.ABORT_STATUS_ALREADY_FINISHED, "this engine holds no KV sessions"
            else:
                raise errors.invalid("none", "Abort without a target")
        except RuleError as err:
            e.log("info", "abort rejected", rule=err.rule, code=err.code.name, error=err.message)
            context.abort(err.code, err.details())
        return control_pb2.AbortResponse(status=status, message=msg)

    def TransferEncoderCache(self, request, context):
        """shared_dir has no transfers: a definite pre-write rejection (CONTRACT Q-2)."""
        context.set_trailing_metadata((("baton-transfer-rejected", "before-write"),))
        context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                      "N-1: this producer publishes over shared_dir; consumers claim entries from the directory")

    def Shutdown(self, request, context):
        e = self.e
        if not request.expected_instance_id:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "S-1: expected_instance_id is empty")
        if request.expected_instance_id != e.instance_id:
            if "shutdown-code-swapped" in e.bugs:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "S-1: not this instance")
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          "S-1: expected_instance_id %r is not this instance" % request.expected_instance_id[:64])
        timeout = request.drain_timeout_ms if request.HasField("drain_timeout_ms") else None
        if e.start_drain(timeout):
            e.log("info", "shutdown accepted", drain_timeout_ms=e.drain_timeout_ms)
            return encoder_pb2.ShutdownResponse(status=encoder_pb2.SHUTDOWN_STATUS_ACCEPTED, message="draining")
        return encoder_pb2.ShutdownResponse(status=encoder_pb2.SHUTDOWN_STATUS_ALREADY_SHUTTING_DOWN, message="already draining")


class HealthServicer(health_pb2_grpc.HealthServicer):
    """grpc.health.v1 mirroring Health (CONTRACT SE-5): SERVING only while READY."""

    SERVICES = ("", "openengine.v1.Inference", "openengine.v1.Control")

    def __init__(self, engine):
        self.e = engine

    def _status(self):
        state, _ = self.e.health()
        return health_pb2.HealthCheckResponse.SERVING if state == control_pb2.HEALTH_STATE_READY \
            else health_pb2.HealthCheckResponse.NOT_SERVING

    def Check(self, request, context):
        if request.service not in self.SERVICES:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown service %r" % request.service)
        return health_pb2.HealthCheckResponse(status=self._status())

    def Watch(self, request, context):
        if request.service not in self.SERVICES:
            yield health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVICE_UNKNOWN)
            return
        last = None
        while context.is_active():
            s = self._status()
            if s != last:
                yield health_pb2.HealthCheckResponse(status=s)
                last = s
            with self.e._lock:
                self.e._lock.wait(timeout=0.5)


def build(cfg):
    """Creates the engine and its gRPC server, bound (not started). Returns (engine, server).

    Raises ValueError/OSError/RuntimeError for a bad configuration or an address in use.
    """
    engine = Engine(cfg)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=64),
        options=[("grpc.so_reuseport", 0),
                 ("grpc.max_receive_message_length", engine.limits.receive_limit_bytes()),
                 ("grpc.max_send_message_length", 64 * MiB)])
    inference_pb2_grpc.add_InferenceServicer_to_server(InferenceServicer(engine), server)
    control_pb2_grpc.add_ControlServicer_to_server(ControlServicer(engine), server)
    health_pb2_grpc.add_HealthServicer_to_server(HealthServicer(engine), server)
    host = cfg.listen.rsplit(":", 1)[0].strip("[]")
    try:
        port = server.add_insecure_port(cfg.listen)
    except RuntimeError:
        port = 0
    if not port:
        if engine.store is not None:
            engine.store.close()
        raise OSError("cannot listen on %s" % cfg.listen)
    engine.endpoint = (host, port, "grpc")
    return engine, server


def start_collector(engine):
    """The producer's collector: TTL expiry within 250 ms (X-2), consumed entries noticed."""
    stop = threading.Event()

    def loop():
        while not stop.wait(0.1):
            try:
                engine.store.collect()
            except Exception as e:  # never let the collector die silently
                engine.log("error", "collector failed", error=repr(e))

    if engine.store is not None:
        threading.Thread(target=loop, name="collector", daemon=True).start()
    return stop


def serve(cfg):
    """Runs one engine until a Shutdown or SIGTERM has drained it. Returns the exit code."""
    try:
        engine, server = build(cfg)
    except OSError as e:
        sys.stderr.write("baton-py-engine: %s\n" % e)
        return 3
    server.start()
    host, port, _ = engine.endpoint
    if cfg.ready_file:
        tmp = cfg.ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%s:%d\n" % (host, port))
        os.replace(tmp, cfg.ready_file)
    engine.log("info", "listening", listen="%s:%d" % (host, port), instance_id=engine.instance_id, preset=engine.preset,
               cache_dir=cfg.cache_dir, bugs=sorted(engine.bugs), test_hooks=cfg.test_hooks)

    def on_signal(signum, frame):
        engine.start_drain()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    stop_collector = start_collector(engine)
    while not engine.shutdown_requested.wait(0.5):
        pass
    stop_collector.set()
    engine.log("info", "draining")
    t0 = time.monotonic()
    clean = engine.drain()
    # Linger, still answering (Health DRAINING, Generate UNAVAILABLE, Shutdown
    # ALREADY_SHUTTING_DOWN), so a client's next call right after an accepted Shutdown gets
    # an answer rather than racing the listener's close (grpcio cancels such calls).
    time.sleep(max(0.0, LINGER_S - (time.monotonic() - t0)))
    server.stop(grace=0.5).wait()
    engine.log("info", "stopped", clean=clean)
    return 0 if clean else 4
