package executor

// Action is what the executor asks its driver to do. Carry actions out in
// the order returned.
type Action interface{ isAction() }

// Member is one request of a batch, with its number of encoder input items.
type Member struct {
	Request string // the request's id
	Items   int    // its encoder input items
}

// RunEncoder asks the driver to run one encoder step over the inputs of
// Members, in order, into one packed storage named Batch (item i of the
// storage is the i-th input over all members). The driver answers with
// EncoderDone or EncoderFailed for Batch, exactly once, whatever happened
// to the members meanwhile.
type RunEncoder struct {
	// Batch names the step and its packed storage.
	Batch BatchID
	// Members are the batch's requests in storage order.
	Members []Member
}

// Ready fires a request's ready event: View of its batch's storage is
// PUBLISHED and the request may Consume it.
type Ready struct {
	Request string // the request's id
	View    View   // its slice of the batch's storage
}

// Fail ends Request with one terminal error (C-6): Cause names the batch's
// failure. The request is gone from the executor.
type Fail struct {
	Request string // the request's id
	Cause   error  // the batch's failure
}

// FreeStorage frees Batch's packed storage: its last view went (C-3) or its
// encoder step failed (C-6). No view of it is live when this is returned.
type FreeStorage struct {
	Batch BatchID // the batch whose storage to free
}

// RecomputeFromView answers a Preempt under Mutation.RecomputeWithoutEncoder
// (the R-2 mutant): Request is not re-admitted and no encoder step runs;
// the driver recomputes its context from View, the view it last consumed,
// whose storage may have been freed since, and records it with
// ContextComputed. The contract's Preempt never returns it.
type RecomputeFromView struct {
	Request string // the preempted request's id
	View    View   // the view it last consumed; its storage may be freed
}

func (RecomputeFromView) isAction() {}

func (RunEncoder) isAction()  {}
func (Ready) isAction()       {}
func (Fail) isAction()        {}
func (FreeStorage) isAction() {}
