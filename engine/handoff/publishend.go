package handoff

import "fmt"

// This file holds the core's decisions about the end of a publish
// (CONTRACT C-1, C-2, C-3, C-7): once its encoder step ended, whether a
// publish whose client cancelled is abandoned or written; once its
// EncoderReady was sent, whether the entry stays (the client has its
// reference), is released (nobody can consume what the client never got)
// or is kept. The engine (engine/server publish) and the simulator
// (sim encodeDone) report what they saw and carry out the answer.

// PublishCancel says when a publish's client cancelled its stream, as far
// as the driver saw it before the entry was written.
type PublishCancel int

// When a publish was cancelled.
const (
	// NotCancelled: the stream is live.
	NotCancelled PublishCancel = iota
	// CancelledDuringStep: the client cancelled while the publish's
	// encoder step was pending; the step completed late (C-1, C-2).
	CancelledDuringStep
	// CancelledWithOutput: the client cancelled once the encoder output
	// was ready, before the entry was written (C-1, C-3).
	CancelledWithOutput
)

var publishCancelNames = map[PublishCancel]string{NotCancelled: "not-cancelled", CancelledDuringStep: "during-step", CancelledWithOutput: "with-output"}

func (c PublishCancel) String() string {
	if n, ok := publishCancelNames[c]; ok {
		return n
	}
	return fmt.Sprintf("PublishCancel(%d)", int(c))
}

// PublishAction is what the producer does at the end of a publish.
type PublishAction int

// Publish actions.
const (
	// PublishAbandon: nothing is published; give back the reservation
	// (ProducerTable.AbandonPublish, C-1) and answer nothing more.
	PublishAbandon PublishAction = iota + 1
	// PublishWrite: write the entry, commit it and send EncoderReady.
	PublishWrite
	// PublishAnswered: the EncoderReady was sent; the entry stays
	// published for the client's consumer.
	PublishAnswered
	// PublishRelease: the EncoderReady never reached the client (the send
	// failed, or the client cancelled before or during it): release the
	// entry as an Abort(encoder_cache) would, nobody waiting for the
	// answer (C-7, C-3).
	PublishRelease
	// PublishKeep: the EncoderReady never reached the client, and the
	// entry is kept all the same (only the KeepOutputAfterCancel mutant).
	PublishKeep
)

var publishActionNames = map[PublishAction]string{PublishAbandon: "abandon", PublishWrite: "write", PublishAnswered: "answered",
	PublishRelease: "release", PublishKeep: "keep"}

func (a PublishAction) String() string {
	if n, ok := publishActionNames[a]; ok {
		return n
	}
	return fmt.Sprintf("PublishAction(%d)", int(a))
}

// DecidePublishStep decides a publish whose encoder step completed (a
// failed step is ProducerTable.EncoderFailed's, C-6): with the stream
// live, PublishWrite; cancelled, PublishAbandon (C-1: nothing is published
// for a client that left; a late completion never revives it, C-2; an
// output ready but unpublished is dropped, C-3). The ReviveLateCompletion
// mutant ignores every cancellation, the KeepOutputAfterCancel mutant one
// that came with the output ready: both then write.
//
// A driver whose executor waits on the step can ask this before the step
// ends, to know whether the wait stops on a cancellation of that kind
// (StopsOnCancel).
func DecidePublishStep(cancel PublishCancel, m Mutants) PublishAction {
	switch {
	case cancel == NotCancelled:
		return PublishWrite
	case m.ReviveLateCompletion:
		return PublishWrite // the C-2 mutant: the cancellation is not looked at
	case cancel == CancelledWithOutput && m.KeepOutputAfterCancel:
		return PublishWrite // the C-3 mutant: a ready output is kept whatever the client does
	}
	return PublishAbandon
}

// StopsOnCancel reports whether a publish's wait on its encoder step ends
// when the client cancels at that point (cancel: CancelledDuringStep for
// the step pending, CancelledWithOutput for the output ready and not yet
// taken): DecidePublishStep abandons such a publish, so the driver stops
// waiting and drops what it held (C-1, C-3).
func StopsOnCancel(cancel PublishCancel, m Mutants) bool {
	return DecidePublishStep(cancel, m) == PublishAbandon
}

// ReadySent is the producer's event for a publish whose EncoderReady send
// returned.
type ReadySent struct {
	// Cancelled: the client's stream was cancelled before or during the
	// send (a send into a buffer may report success all the same).
	Cancelled bool
	// SendFailed: the send failed for a cause other than the
	// cancellation.
	SendFailed bool
}

// DecideReadySent decides the end of a committed publish once its
// EncoderReady send returned (CONTRACT C-7): delivered to a live stream,
// PublishAnswered; otherwise PublishRelease: a client that cancelled its
// own stream, or never got the reference, has no claim on it, and nobody
// can consume what it never got (C-3, C-7). The ReviveLateCompletion
// mutant does not look at the cancellation (a send that did not fail
// counts as answered); the KeepOutputAfterCancel mutant keeps an entry
// whose EncoderReady never reached the client (PublishKeep).
func DecideReadySent(ev ReadySent, m Mutants) PublishAction {
	switch {
	case !ev.Cancelled && !ev.SendFailed:
		return PublishAnswered
	case m.ReviveLateCompletion && !ev.SendFailed:
		return PublishAnswered // the C-2 mutant: answered on the stream nobody listens to
	case m.KeepOutputAfterCancel && ev.Cancelled:
		return PublishKeep // the C-3 mutant: a send that failed on a live stream still releases (C-7 is not its rule)
	}
	return PublishRelease
}
