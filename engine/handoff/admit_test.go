package handoff

import (
	"errors"
	"strings"
	"testing"
)

// TestAdmitPrecedence checks that AdmitConsume and AdmitTransfer answer a
// reference that breaks several rules with the first in CONTRACT's order
// (health -> L-1 -> SU-4 -> H-3 -> N-1 -> SE-3 -> SU-5 -> SU-2), and run
// no check past the one that decided (a parse never sees an oversize
// reference, nothing dials an untrusted endpoint, no tag is checked for a
// backend the consumer does not accept).
func TestAdmitPrecedence(t *testing.T) {
	key := []byte("admit test key")
	good := Reference{Backend: "shared_dir", ProducerInstanceID: "0123abcd-0000-4000-8000-0123456789ab", EntryID: strings.Repeat("ab", 16), ExpiresUnixMs: 1000, Items: []ItemMeta{{Rows: 1, Cols: 1}}}
	tcp := good
	tcp.Backend = "tcp"
	errUntrusted := rejectf(ErrUntrustedPeer, "SE-3 endpoint")
	errAgent := rejectf(ErrBadRequest, "consumer_agent")
	errDraining := rejectf(ErrDraining, "S-2")

	// breaks is the set of rules a consumer case breaks.
	type breaks struct {
		size, parse, hash, backend, trust, tag bool
		ref                                    Reference
	}
	consume := func(b breaks) (error, []string) {
		var ran []string
		bytes := 200
		if b.size {
			bytes = MaxOpaqueStateBytes + 1
		}
		_, err := AdmitConsume(ConsumeAdmission{
			OpaqueBytes: bytes,
			Parse: func() (Reference, error) {
				ran = append(ran, "parse")
				if b.parse {
					return Reference{}, rejectf(ErrMalformedReference, "SU-4")
				}
				if b.hash {
					return Reference{}, rejectf(ErrMalformedHash, "H-3")
				}
				return b.ref, nil
			},
			Accepts:  func(string) bool { return !b.backend },
			Accepted: []string{"shared_dir", "tcp"},
			Transfer: func(be string) bool { return be == "tcp" },
			Trust: func(Reference) error {
				ran = append(ran, "trust")
				if b.trust {
					return errUntrusted
				}
				return nil
			},
			Verify: func(r Reference) error {
				ran = append(ran, "verify")
				if b.tag {
					return rejectf(ErrForeignReference, "SU-5 tag")
				}
				return nil
			},
		})
		return err, ran
	}
	for _, c := range []struct {
		name string
		b    breaks
		want error
		ran  string
	}{
		{"L-1 before SU-4", breaks{size: true, parse: true, ref: good}, ErrTooLarge, ""},
		{"SU-4 before N-1", breaks{parse: true, backend: true, ref: good}, ErrMalformedReference, "parse"},
		{"H-3 before N-1", breaks{hash: true, backend: true, ref: good}, ErrMalformedHash, "parse"},
		{"N-1 before SU-5", breaks{backend: true, tag: true, ref: good}, ErrBackendNotAccepted, "parse"},
		{"N-1 before SE-3", breaks{backend: true, trust: true, ref: tcp}, ErrBackendNotAccepted, "parse"},
		{"SE-3 before SU-5 ids", breaks{trust: true, ref: Reference{Backend: "tcp", EntryID: "../x"}}, ErrUntrustedPeer, "parse trust"},
		{"SU-5 ids on a transfer backend", breaks{ref: Reference{Backend: "tcp", EntryID: "../x"}}, ErrForeignReference, "parse trust"},
		{"SU-5 tag on shared_dir", breaks{tag: true, ref: good}, ErrForeignReference, "parse verify"},
		{"admitted over a transfer backend: the producer checks the tag", breaks{tag: true, ref: tcp}, nil, "parse trust"},
		{"admitted", breaks{ref: good}, nil, "parse verify"},
	} {
		err, ran := consume(c.b)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) || strings.Join(ran, " ") != c.ran {
			t.Errorf("consume %s: %v after [%s]; want %v after [%s]", c.name, err, strings.Join(ran, " "), c.want, c.ran)
		}
	}

	type tbreaks struct {
		health, size, parse, agent, untrusted, tag, targets bool
		ref                                                 Reference
		now                                                 int64
	}
	transfer := func(b tbreaks) (error, []string) {
		var ran []string
		bytes := 200
		if b.size {
			bytes = MaxOpaqueStateBytes + 1
		}
		_, err := AdmitTransfer(TransferAdmission{
			Health: func() error {
				if b.health {
					return errDraining
				}
				return nil
			},
			OpaqueBytes: bytes,
			Parse: func() (Reference, error) {
				ran = append(ran, "parse")
				if b.parse {
					return Reference{}, rejectf(ErrMalformedReference, "SU-4")
				}
				return b.ref, nil
			},
			Serves: []string{"tcp"},
			Agent: func() error {
				ran = append(ran, "agent")
				if b.agent {
					return errAgent
				}
				if b.untrusted {
					return errUntrusted
				}
				return nil
			},
			Self: good.ProducerInstanceID,
			Verify: func(r Reference) error {
				ran = append(ran, "verify")
				if b.tag {
					return r.Verify([]byte("another key"))
				}
				return r.Verify(key)
			},
			NowUnixMs: b.now,
			Targets: func(Reference) error {
				ran = append(ran, "targets")
				if b.targets {
					return rejectf(ErrBadRequest, "targets")
				}
				return nil
			},
		})
		return err, ran
	}
	sealed := func(r Reference) Reference {
		p, err := ParseReference(r.Backend, r.ProducerInstanceID, r.Endpoint, r.Seal(key), 0)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	other := tcp
	other.ProducerInstanceID = "0123abcd-0000-4000-8000-0123456789ac"
	for _, c := range []struct {
		name string
		b    tbreaks
		want error
		ran  string
	}{
		{"health before L-1", tbreaks{health: true, size: true}, ErrDraining, ""},
		{"L-1 before SU-4", tbreaks{size: true, parse: true}, ErrTooLarge, ""},
		{"SU-4 before the agent", tbreaks{parse: true, agent: true}, ErrMalformedReference, "parse"},
		{"SU-4 another backend before the agent", tbreaks{agent: true, ref: sealed(good)}, ErrMalformedReference, "parse"},
		{"a malformed agent before SU-5", tbreaks{agent: true, ref: sealed(other)}, ErrBadRequest, "parse agent"},
		{"SE-3 before SU-5", tbreaks{untrusted: true, tag: true, ref: sealed(tcp)}, ErrUntrustedPeer, "parse agent"},
		{"SU-5 another instance before the tag", tbreaks{ref: sealed(other)}, ErrForeignReference, "parse agent"},
		{"SU-5 tag before SU-2", tbreaks{tag: true, now: 5000, ref: sealed(tcp)}, ErrForeignReference, "parse agent verify"},
		{"SU-2 before the targets", tbreaks{targets: true, now: 5000, ref: sealed(tcp)}, ErrSpentReference, "parse agent verify"},
		{"targets", tbreaks{targets: true, ref: sealed(tcp)}, ErrBadRequest, "parse agent verify targets"},
		{"admitted", tbreaks{ref: sealed(tcp)}, nil, "parse agent verify targets"},
	} {
		err, ran := transfer(c.b)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) || strings.Join(ran, " ") != c.ran {
			t.Errorf("transfer %s: %v after [%s]; want %v after [%s]", c.name, err, strings.Join(ran, " "), c.want, c.ran)
		}
	}
}

// TestAdmitReceiveSpentBeforeQuota: a spent entry is SU-2 even when the
// receive would pass the consumer's quota (L-5), and the quota is not
// touched; a look that fails leaves the decision to the claim.
func TestAdmitReceiveSpentBeforeQuota(t *testing.T) {
	c := NewConsumerReceives(ConsumerConfig{InflightQuotaBytes: 10})
	id := strings.Repeat("cd", 16)
	eio := errors.New("EIO")
	preflight := func(n int64) func() error { return func() error { return c.Preflight("r/"+id, n) } }
	if err := AdmitReceive(id, false, nil, preflight(100)); !errors.Is(err, ErrSpentReference) || c.Inflight() != 0 {
		t.Fatalf("spent and over quota = %v (%d in flight); want SU-2, nothing reserved", err, c.Inflight())
	}
	if err := AdmitReceive(id, true, nil, preflight(100)); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("there and over quota = %v; want L-5", err)
	}
	if err := AdmitReceive(id, false, eio, preflight(5)); err != nil || c.Inflight() != 1 {
		t.Fatalf("a failed look = %v (%d in flight); want the receive reserved", err, c.Inflight())
	}
}

// TestAdmitUnexpired: a reference is spent from its expiry on (SU-2: at
// the expiry ms itself, not after), with the message both drivers answer.
func TestAdmitUnexpired(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef"
	if err := AdmitUnexpired(id, 1000, 999); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	for _, now := range []int64{1000, 5000} {
		err := AdmitUnexpired(id, 1000, now)
		if !errors.Is(err, ErrSpentReference) {
			t.Fatalf("at %d: %v, want ErrSpentReference", now, err)
		}
		if want := ErrSpentReference.Error() + ": SU-2 reference 01234567.. expired"; err.Error() != want {
			t.Fatalf("message %q, want %q", err.Error(), want)
		}
	}
}
