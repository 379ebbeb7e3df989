"""The `shared_dir` backend on disk (docs/implementing.md section 4.3), producer and consumer.

Layout under the configured root:
  <root>/<instance id>/                 0700, one per producer instance
      lock                              0600, empty, flock-ed by its producer for its life
      hmac.key                          0600, 32 random bytes: the instance's reference key
      <entry id>.safetensors            0600, a published entry
      .tmp-<entry id>-<16 hex>          an entry being written
      .tmp-key-<16 hex>, .tmp-lock-<16 hex>
      .claimed-<entry id>-<16 hex>      an entry taken by a consumer or by its producer

The single-use decision is rename(2) of `<entry id>.safetensors` to a `.claimed-` name: it
succeeds for exactly one caller across all processes (SU-1). The producer releases (Abort,
expiry, drain) by the same rename, then deletes (X-1). It learns of a consumer's claim by
looking (lstat at collection, GetLoad, Abort).

Errors are RuleError with the CONTRACT rule that decides them (see reference.py for the order).
"""

import collections
import errno
import fcntl
import os
import re
import secrets
import stat
import threading
import time

from . import errors, reference, safetensors

KEY_BYTES = 32
ORPHAN_AGE_S = 60.0
LEFTOVER_AGE_S = 60.0
SWEEP_PERIOD_S = 10.0
RELEASE_WAIT_S = 10.0  # how long a release waits for another removal of its entry to end
SWEEP_MAX_DIRS = 16
FORMAT = "baton.encoder.v1/entry"
MiB = 1 << 20

_ENTRY_NAME = re.compile(r"^([0-9a-f]{32})\.safetensors$")


def now_ms():
    return int(time.time() * 1000)


def _hex16():
    return secrets.token_hex(8)


def _create_exclusive(path):
    """O_CREAT|O_EXCL with mode exactly 0600 whatever the umask; returns the descriptor."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)
    return fd


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _unlink_missing_ok(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


Entry = collections.namedtuple("Entry", "id exp_ms size_bytes items")


class ProducerStore:
    """A producer instance's directory and its table of published entries (thread-safe).

    publish() reserves the L-5 quota (RESOURCE_EXHAUSTED past it, nothing partial), writes
    the entry (temp file, fsync, rename, fsync of the directory) and returns its reference.
    release() answers "ABORTED" the first time it takes a published entry back and
    "ALREADY_FINISHED" for every later call and for entries consumed or expired (SU-3).
    collect() expires entries whose TTL passed (X-2) and frees the quota of consumed ones.
    close() releases everything and removes the instance directory (S-4).
    """

    def __init__(self, root, instance_id, preset, quota_bytes, log, bugs=frozenset()):
        self.root = root
        self.instance_id = instance_id
        self.preset = preset
        self.quota_bytes = quota_bytes
        self.log = log
        self.bugs = bugs
        self.dir = os.path.join(root, instance_id)
        self._lock = threading.Lock()
        self._removed = threading.Condition(self._lock)  # notified when a removal ends
        self._table = {}  # id -> Entry, PUBLISHED entries only
        self._busy = set()  # ids being released right now
        self._failed = set()  # ids whose removal failed
        self._fail_next = set()  # ids whose first removal is to fail (test hook baton.cleanup_fail)
        self.cleanup_failures = []
        self._held_bytes = 0
        self._reserved_bytes = 0
        self._lock_fd = None
        self._last_sweep = 0.0
        self.counts = collections.Counter()
        self._start()

    # --- start and shutdown -------------------------------------------------------------

    def _start(self):
        try:
            st = os.lstat(self.root)
        except FileNotFoundError:
            os.mkdir(self.root, 0o700)
            os.chmod(self.root, 0o700)  # created by us: exactly 0700; an existing root is never changed
            st = os.lstat(self.root)
        if not stat.S_ISDIR(st.st_mode):
            raise RuntimeError("cache dir %s is not a directory (or is a symbolic link)" % self.root)
        os.mkdir(self.dir, 0o700)  # must not exist: instance ids are fresh
        os.chmod(self.dir, 0o700)
        tmp = os.path.join(self.dir, ".tmp-lock-" + _hex16())
        fd = _create_exclusive(tmp)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(tmp, os.path.join(self.dir, "lock"))
        self._lock_fd = fd
        self.key = secrets.token_bytes(KEY_BYTES)
        tmp = os.path.join(self.dir, ".tmp-key-" + _hex16())
        fd = _create_exclusive(tmp)
        try:
            _write_all(fd, self.key)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, os.path.join(self.dir, "hmac.key"))
        _fsync_dir(self.dir)
        _fsync_dir(self.root)
        self.sweep_orphans()

    def close(self):
        """S-4: release every entry, delete every other file, `lock` last, rmdir, fsync root.

        Returns True when nothing of the instance remains.
        """
        for entry_id in list(self._table):
            self.release(entry_id, reason="drain")
        ok = True
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            names = []
        for name in names:
            if name != "lock":
                try:
                    _unlink_missing_ok(os.path.join(self.dir, name))
                except OSError as e:
                    ok = False
                    self.log("error", "shutdown: cannot delete", path=name, error=str(e))
        try:
            _unlink_missing_ok(os.path.join(self.dir, "lock"))
            os.rmdir(self.dir)
            _fsync_dir(self.root)
        except OSError as e:
            ok = False
            self.log("error", "shutdown: cannot remove the instance directory", error=str(e))
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        return ok

    # --- orphans of dead producers ------------------------------------------------------

    def sweep_orphans(self):
        """Removes the directories of dead instances (their lock can be taken, or no lock and
        older than 60 s), at most SWEEP_MAX_DIRS per call; never touches anything else."""
        self._last_sweep = time.monotonic()
        removed = 0
        try:
            names = os.listdir(self.root)
        except OSError:
            return 0
        for name in names:
            if removed >= SWEEP_MAX_DIRS:
                break
            if name == self.instance_id or not reference.UUID_RE.match(name):
                continue
            path = os.path.join(self.root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                continue
            lock_path = os.path.join(path, "lock")
            try:
                fd = os.open(lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except FileNotFoundError:
                fd = None
                if time.time() - st.st_mtime <= ORPHAN_AGE_S:
                    continue
            except OSError:
                continue
            try:
                if fd is not None:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except OSError:
                        continue  # its owner is alive
                if self._remove_dir(path):
                    removed += 1
            finally:
                if fd is not None:
                    os.close(fd)
        return removed

    def _remove_dir(self, path):
        try:
            for name in os.listdir(path):
                if name != "lock":
                    _unlink_missing_ok(os.path.join(path, name))
            _unlink_missing_ok(os.path.join(path, "lock"))
            os.rmdir(path)
            self.log("info", "removed the directory of a dead producer instance", path=path)
            return True
        except OSError as e:
            self.log("warn", "orphan sweep: cannot remove (left for the next sweep)", path=path, error=str(e))
            return False

    # --- publish ---------------------------------------------------------------------------

    def reserve(self, size_bytes):
        """L-5: reserve bytes against the quota, or RESOURCE_EXHAUSTED (after collecting)."""
        for attempt in (0, 1):
            with self._lock:
                if self.quota_bytes <= 0 or self._held_bytes + self._reserved_bytes + size_bytes <= self.quota_bytes \
                        or "no-producer-quota" in self.bugs:
                    self._reserved_bytes += size_bytes
                    return
            if attempt == 0:
                self.collect()  # consumed entries free their bytes when we look
        raise errors.exhausted("L-5", "publishing %d bytes would exceed the producer quota of %d (%d held)"
                               % (size_bytes, self.quota_bytes, self._held_bytes))

    def unreserve(self, size_bytes):
        with self._lock:
            self._reserved_bytes -= size_bytes

    def publish(self, items, embeddings, ttl_ms, backend, endpoint, size_bytes, fail_first_removal=False):
        """Writes one entry (bytes reserved by reserve(size_bytes)); returns (opaque, exp_ms).

        items: [reference.Item]; embeddings: [float32 array [rows, cols]], in item order.
        The reservation is this call's from here: on failure it is given back.
        fail_first_removal is the test hook baton.cleanup_fail (X-1).
        """
        entry_id = secrets.token_hex(16)  # 128 random bits (SU-5)
        created = now_ms()
        meta = {
            "baton.format": FORMAT,
            "baton.producer_instance_id": self.instance_id,
            "baton.entry_id": entry_id,
            "baton.items": "[" + ",".join('{"hash":"%s","rows":%d,"cols":%d}' % (i.hash, i.rows, i.cols) for i in items) + "]",
            "baton.created_unix_ms": str(created),
            "baton.ttl_ms": str(ttl_ms),
            "baton.preset": self.preset,
        }
        data = safetensors.dumps([("item.%d" % k, e) for k, e in enumerate(embeddings)], meta)
        tmp = os.path.join(self.dir, ".tmp-%s-%s" % (entry_id, _hex16()))
        try:
            fd = _create_exclusive(tmp)
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            exp = now_ms() + ttl_ms
            with self._lock:
                # In the table before the name appears, so collection never misses it.
                self._table[entry_id] = Entry(entry_id, exp, size_bytes, tuple(items))
                if fail_first_removal:
                    self._fail_next.add(entry_id)
                self._reserved_bytes -= size_bytes
                self._held_bytes += size_bytes
            os.rename(tmp, os.path.join(self.dir, entry_id + ".safetensors"))
            _fsync_dir(self.dir)
        except BaseException:
            _unlink_missing_ok(tmp)
            with self._lock:
                if self._table.pop(entry_id, None) is not None:
                    self._held_bytes -= size_bytes
                else:
                    self._reserved_bytes -= size_bytes
            raise
        self.counts["published"] += 1
        opaque = reference.seal(self.key, backend, self.instance_id, endpoint, entry_id, exp, items,
                                body_only="tag-body-only" in self.bugs)
        return opaque, exp

    # --- release, expiry, collection -----------------------------------------------------

    def release(self, entry_id, reason="abort"):
        """Takes a published entry back (SU-3, X-1, X-2, S-2).

        Returns "ABORTED" the first time it takes a published entry back, "ALREADY_FINISHED"
        when the entry is no longer published (consumed, released, expired), "FAILED" when
        the removal failed (X-1: the caller answers UNAVAILABLE; the entry's storage may
        still exist). A release that finds another removal of the entry in progress (an
        earlier release, its expiry, the drain) waits for its outcome first: until the rename
        and the delete are done a consumer may still claim the file, so "spent" must not be
        answered early (SU-2, SU-3; docs/implementing.md "Releasing").
        """
        with self._lock:
            if entry_id in self._failed:
                return "FAILED"
            if "abort-aborted-twice" in self.bugs and reason == "abort" and (
                    entry_id not in self._table or entry_id in self._busy):
                return "ABORTED"  # seeded bug: no look at the entry's state
            deadline = time.monotonic() + RELEASE_WAIT_S
            while entry_id in self._busy and time.monotonic() < deadline:
                self._removed.wait(deadline - time.monotonic())
            if entry_id in self._failed:
                return "FAILED"
            if entry_id in self._busy:
                return "FAILED"  # the other removal has not ended: the storage may still exist
            entry = self._table.get(entry_id)
            if entry is None:
                return "ALREADY_FINISHED"
            self._busy.add(entry_id)
        outcome = "failed"
        try:
            with self._lock:
                fail = entry_id in self._fail_next
                self._fail_next.discard(entry_id)
            if fail:
                # The hook: the rename happens (nobody can claim the entry any more), the
                # delete "fails", so the storage is left behind under its .claimed- name.
                src = os.path.join(self.dir, entry_id + ".safetensors")
                os.rename(src, os.path.join(self.dir, ".claimed-%s-%s" % (entry_id, _hex16())))
                raise OSError(errno.EIO, "injected removal failure (test hook baton.cleanup_fail)")
            outcome = self._claim_and_delete(entry_id, keep_file="release-keeps-file" in self.bugs and reason == "abort")
        except OSError as e:
            self.log("error", "cleanup failed (X-1)", entry_id=entry_id, reason=reason, error=str(e))
        finally:
            with self._lock:
                self._busy.discard(entry_id)
                self._removed.notify_all()
                if self._table.pop(entry_id, None) is not None:
                    self._held_bytes -= entry.size_bytes
                if outcome == "failed":
                    self._failed.add(entry_id)
                    self.cleanup_failures.append("%s of entry %s failed" % (reason, entry_id))
        if outcome == "claimed":
            self.counts["expired" if reason == "expiry" else "released"] += 1
            return "ABORTED"
        if outcome == "gone":
            self.counts["consumed"] += 1
            return "ALREADY_FINISHED"
        return "FAILED"

    def _claim_and_delete(self, entry_id, keep_file=False):
        src = os.path.join(self.dir, entry_id + ".safetensors")
        if keep_file:  # seeded bug: answers as if released; the entry stays claimable
            return "claimed" if os.path.lexists(src) else "gone"
        dst = os.path.join(self.dir, ".claimed-%s-%s" % (entry_id, _hex16()))
        try:
            os.rename(src, dst)
        except FileNotFoundError:
            return "gone"  # a consumer claimed it first
        os.unlink(dst)
        return "claimed"

    def collect(self):
        """Expires entries past their TTL, notices consumed ones, deletes own old leftovers."""
        now = now_ms()
        with self._lock:
            entries = [e for e in self._table.values() if e.id not in self._busy]
        for e in entries:
            if now >= e.exp_ms:
                self.release(e.id, reason="expiry")
                continue
            try:
                os.lstat(os.path.join(self.dir, e.id + ".safetensors"))
            except FileNotFoundError:
                with self._lock:
                    if e.id not in self._busy and self._table.pop(e.id, None) is not None:
                        self._held_bytes -= e.size_bytes
                        self.counts["consumed"] += 1
        self._delete_leftovers()
        if time.monotonic() - self._last_sweep >= SWEEP_PERIOD_S:
            self.sweep_orphans()

    def _delete_leftovers(self):
        try:
            names = os.listdir(self.dir)
        except OSError:
            return
        cutoff = time.time() - LEFTOVER_AGE_S
        for name in names:
            if name.startswith(".tmp-") or name.startswith(".claimed-"):
                path = os.path.join(self.dir, name)
                try:
                    if os.lstat(path).st_mtime < cutoff:
                        os.unlink(path)
                except FileNotFoundError:
                    pass

    def stats(self):
        with self._lock:
            return len(self._table), self._held_bytes

    def known(self, entry_id):
        with self._lock:
            return entry_id in self._table


class Consumer:
    """Consumes shared_dir entries of any producer on this host (docs section 4.3).

    consume(ref, msg_ref) runs, in the CONTRACT order, SU-5 (ids, key file, tag), SU-2
    (expiry, lstat), L-5 (in-flight bytes), then the claim by rename and the read; returns
    the embeddings, float32 [rows, cols] per item (any shape the reference declares).
    """

    def __init__(self, root, inflight_quota_bytes, log, bugs=frozenset()):
        self.root = root
        self.inflight_quota_bytes = inflight_quota_bytes
        self.log = log
        self.bugs = bugs
        self._keys = {}
        self._lock = threading.Lock()
        self._inflight_bytes = 0
        self.inflight = 0
        self.cleanup_failures = []

    def key_for(self, instance_id):
        with self._lock:
            k = self._keys.get(instance_id)
        if k is not None:
            return k
        d = os.path.join(self.root, instance_id)
        try:
            if not stat.S_ISDIR(os.lstat(d).st_mode):
                raise FileNotFoundError
            fd = os.open(os.path.join(d, "hmac.key"), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            raise errors.invalid("SU-5", "no producer instance %s on this host (no directory or key file)" % instance_id)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_mode & 0o077 or st.st_size != KEY_BYTES:
                raise errors.invalid("SU-5", "the key file of producer instance %s is not valid" % instance_id)
            k = os.read(fd, KEY_BYTES + 1)
        finally:
            os.close(fd)
        if len(k) != KEY_BYTES:
            raise errors.invalid("SU-5", "the key file of producer instance %s is not valid" % instance_id)
        with self._lock:
            self._keys[instance_id] = k
        return k

    def check(self, ref, msg_ref):
        """SU-5 then SU-2 (expiry, lstat): everything that consumes nothing."""
        reference.check_ids(ref, msg_ref.producer_instance_id)
        if "tag-unchecked" not in self.bugs:
            key = self.key_for(msg_ref.producer_instance_id)
            reference.verify(ref, key, msg_ref.backend, msg_ref.producer_instance_id, reference.endpoint_of(msg_ref),
                             body_only="tag-body-only" in self.bugs)
        if now_ms() >= ref.exp:
            raise errors.invalid("SU-2", "the reference expired")
        path = self.entry_path(ref, msg_ref)
        try:
            os.lstat(path)
        except FileNotFoundError:
            raise errors.invalid("SU-2", "the entry is spent (consumed, released or expired)")
        except OSError as e:
            raise errors.invalid("SU-5", "the entry cannot be addressed: %s" % e)

    def entry_path(self, ref, msg_ref):
        return os.path.join(self.root, msg_ref.producer_instance_id, ref.id + ".safetensors")

    def payload_bytes(self, ref):
        return sum(i.rows * i.cols * 4 for i in ref.items)

    def reserve(self, ref):
        """L-5 on the consumer: in-flight receive bytes."""
        size = self.payload_bytes(ref)
        with self._lock:
            if self.inflight_quota_bytes > 0 and self._inflight_bytes + size > self.inflight_quota_bytes:
                raise errors.exhausted("L-5", "receiving %d bytes would exceed the in-flight bound of %d"
                                       % (size, self.inflight_quota_bytes))
            self._inflight_bytes += size
            self.inflight += 1
        return size

    def unreserve(self, size):
        with self._lock:
            self._inflight_bytes -= size
            self.inflight -= 1

    def claim(self, ref, msg_ref, keep_file=False):
        """Steps 4-7: open, fstat, claim by rename, read through the descriptor, delete, decode.

        keep_file exists only for the seeded bug `consume-not-atomic`.
        """
        path = self.entry_path(ref, msg_ref)
        payload = self.payload_bytes(ref)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise errors.invalid("SU-2", "the entry is spent (consumed, released or expired)")
        except OSError as e:
            raise errors.invalid("SU-5", "the entry cannot be opened: %s" % e)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise errors.invalid("SU-5", "the entry is not a regular file")
            if st.st_size > payload + MiB:
                raise errors.exhausted("L-5", "the entry file (%d bytes) is larger than its payload + 1 MiB" % st.st_size)
            claimed = os.path.join(os.path.dirname(path), ".claimed-%s-%s" % (ref.id, _hex16()))
            if not keep_file:
                try:
                    os.rename(path, claimed)
                except FileNotFoundError:
                    raise errors.invalid("SU-2", "the entry is spent (another consumer or its producer took it)")
            # From here on the entry is consumed, whatever happens next.
            chunks = []
            left = st.st_size
            while left > 0:
                b = os.pread(fd, min(left, 1 << 22), st.st_size - left)
                if not b:
                    break
                chunks.append(b)
                left -= len(b)
        finally:
            os.close(fd)
        if not keep_file:
            try:
                os.unlink(claimed)
            except OSError as e:
                self.cleanup_failures.append("delete %s: %s" % (claimed, e))  # X-1 on the consumer
        data = b"".join(chunks)
        try:
            return self.decode(data, ref, msg_ref)
        except safetensors.SafetensorsError as e:
            raise errors.RuleError(errors.grpc.StatusCode.INTERNAL, "none", "the claimed entry is corrupt: %s" % e)

    def decode(self, data, ref, msg_ref):
        meta, tensors = safetensors.loads(data)
        if meta.get("baton.entry_id") != ref.id or meta.get("baton.producer_instance_id") != msg_ref.producer_instance_id:
            raise safetensors.SafetensorsError("entry metadata names another entry or producer")
        if len(tensors) != len(ref.items):
            raise safetensors.SafetensorsError("%d tensors for %d items" % (len(tensors), len(ref.items)))
        out = []
        for k, ((name, arr), item) in enumerate(zip(tensors, ref.items)):
            if name != "item.%d" % k or arr.shape != (item.rows, item.cols):
                raise safetensors.SafetensorsError("tensor %s %s does not match item %d [%d, %d]"
                                                   % (name, arr.shape, k, item.rows, item.cols))
            out.append(arr)
        return out
