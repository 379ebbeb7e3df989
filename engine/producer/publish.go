package producer

import (
	"context"

	"github.com/baton-dev/baton/engine/handoff"
)

// Publish is one publish in progress (CONTRACT C-1, C-2, C-3, C-6, C-7,
// L-5): its entry reserved in the table (BeginPublish) until it is
// committed (Commit) or ends otherwise (End). It carries out the core's
// decisions about the publish's end (handoff.DecidePublishStep,
// EncoderFailed, DecideReadySent); the encoder step, the store's write,
// the reference and the EncoderReady on the wire stay with the caller
// (engine/server). Not safe for concurrent use: one publish, one
// goroutine.
type Publish struct {
	d *Driver
	// ID is the entry's id (32 lowercase hex digits, SU-6).
	ID string
	// committed: CommitPublish succeeded; ended: the core ended the
	// publish (EncoderFailed). Either way End gives nothing back.
	committed, ended bool
}

// BeginPublish reserves payloadBytes of the producer's quota for entry id
// (Table.Reserve). Errors: handoff.ErrQuotaExceeded (L-5, nothing
// reserved: RESOURCE_EXHAUSTED), handoff.ErrBadRequest (an invalid or
// duplicate id). The caller defers End.
func (d *Driver) BeginPublish(id string, payloadBytes int64) (*Publish, error) {
	d.Env.Lock()
	err := d.Table.Reserve(id, payloadBytes)
	d.Env.Unlock()
	if err != nil {
		return nil, err
	}
	return &Publish{d: d, ID: id}, nil
}

// End gives back everything a publish reserved unless it was committed or
// the core ended it (Table.AbandonPublish: C-1, a publish cancelled or
// failed before publication; C-6). Defer it after BeginPublish.
func (p *Publish) End() {
	if p.committed || p.ended {
		return
	}
	p.d.Env.Lock()
	p.d.Table.AbandonPublish(p.ID)
	p.d.Env.Unlock()
}

// EncoderFailed ends a publish whose encoder step failed (C-6): the core
// abandons it (Table.EncoderFailed), or, under the C-6 mutant
// (handoff.Mutants.KeepReservationOnEncoderFailure), keeps its
// reservation, which End then leaves alone.
func (p *Publish) EncoderFailed() {
	p.d.Env.Lock()
	abandoned := p.d.Table.EncoderFailed(p.ID, p.d.Env.Decisions())
	p.d.Env.Unlock()
	p.ended = true
	if !abandoned {
		p.d.Log.Warn("C-6 encoder step failed; the reservation is kept", "entry", p.ID)
	}
}

// StepEnded decides a publish whose encoder step completed, the client
// having cancelled (cancelled) or not (handoff.DecidePublishStep with
// handoff.CancelledWithOutput): true when the entry is to be written,
// false when the publish is abandoned (C-1: nothing is published for a
// client that left; End gives the reservation back). The C-2 and C-3
// mutants write anyway.
func (p *Publish) StepEnded(cancelled bool) (write bool) {
	if !cancelled {
		return true
	}
	return handoff.DecidePublishStep(handoff.CancelledWithOutput, p.d.Env.Decisions()) != handoff.PublishAbandon
}

// Commit makes the written entry published, expiring at expiresMs (Unix
// ms; Table.CommitPublish); from then on End gives nothing back. An error
// is the core's refusal (a bug: the entry was not reserved).
func (p *Publish) Commit(expiresMs int64) error {
	p.d.Env.Lock()
	err := p.d.Table.CommitPublish(p.ID, expiresMs)
	p.d.Env.Unlock()
	if err == nil {
		p.committed = true
	}
	return err
}

// ReadySent carries out what the core decides once the publish's
// EncoderReady was sent (handoff.DecideReadySent: C-3, C-7): sendErr is
// the send's error, cancelErr the stream's (a send into a buffer may
// report success although the client cancelled during it: a client that
// cancels its own stream has no claim on the reference, C-7, so the
// cancellation counts apart from a send that failed for another cause).
// The entry stays published when the client has it, is released (Release,
// nobody waiting for the answer, without ctx's cancellation; a failure is
// logged) when the EncoderReady never reached the client, and is kept
// under the C-3 mutant. It returns the publish's answer: sendErr, else
// cancelErr (nil once answered on a live stream).
func (p *Publish) ReadySent(ctx context.Context, sendErr, cancelErr error) error {
	act := handoff.DecideReadySent(handoff.ReadySent{Cancelled: cancelErr != nil, SendFailed: sendErr != nil && cancelErr == nil}, p.d.Env.Decisions())
	err := sendErr
	if err == nil {
		err = cancelErr
	}
	switch act {
	case handoff.PublishKeep:
		// The C-3 mutant: the entry is kept for a client that never got it.
		p.d.Log.Warn("EncoderReady send failed or cancelled; entry kept", "entry", p.ID, "err", err)
	case handoff.PublishRelease:
		// C-7: nobody can consume what the client never got.
		if _, rerr := p.d.Release(context.WithoutCancel(ctx), p.ID); rerr != nil {
			p.d.Log.Error("C-7 release after failed send", "entry", p.ID, "err", rerr)
		}
	}
	return err
}
