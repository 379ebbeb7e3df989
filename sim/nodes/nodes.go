package nodes

import "github.com/baton-dev/baton/sim/world"

// Behaviour returns the node behaviour every world runs (package sim
// installs it with world.SetBehaviour): the handlers of the node event
// kinds this package owns, and the hooks of the world's send and arrival
// paths.
func Behaviour() *world.Behaviour {
	b := &world.Behaviour{
		DropsSend:          partitionDropsSend,
		DropsArrival:       partitionDropsArrival,
		StaleProducerEvent: staleProducerEvent,
		StartEPPD:          startEPPD,
		PrefillReady:       prefillReady,
		DecodeAnswer:       decodeAnswer,
		Decode:             decode,
		DrainEPPD:          drainEPPD,
		DrainKVSessions:    drainKVSessions,
		ConsumerCancelled:  consumerCancelled,
	}
	b.Handlers[world.EvClientStart] = clientStart
	b.Handlers[world.EvClientCancel] = clientCancel
	b.Handlers[world.EvConsumeArrive] = consumeArrive
	b.Handlers[world.EvClaimRead] = claimRead
	b.Handlers[world.EvTransferReply] = transferReply
	b.Handlers[world.EvTransferTimeout] = transferTimeout
	b.Handlers[world.EvPublishArrive] = publishArrive
	b.Handlers[world.EvEncodeDone] = encodeDone
	b.Handlers[world.EvReleaseArrive] = releaseArrive
	b.Handlers[world.EvRemoveDone] = removeDone
	b.Handlers[world.EvTransferArrive] = transferArrive
	b.Handlers[world.EvWriteLand] = writeLand
	b.Handlers[world.EvWriteComplete] = writeComplete
	b.Handlers[world.EvWriteDeadline] = writeDeadline
	b.Handlers[world.EvProducerConsume] = producerConsume
	b.Handlers[world.EvClientDeadline] = clientDeadline
	b.Handlers[world.EvReadyArrive] = readyArrive
	b.Handlers[world.EvPublishFailArrive] = publishFailArrive
	b.Handlers[world.EvConsumeReplyArrive] = consumeReplyArrive
	b.Handlers[world.EvReleaseReplyArrive] = releaseReplyArrive
	b.Handlers[world.EvCollect] = collect
	b.Handlers[world.EvShutdown] = shutdown
	b.Handlers[world.EvDrainTick] = drainTick
	b.Handlers[world.EvChaos] = chaos
	b.Handlers[world.EvCrash] = crash
	b.Handlers[world.EvRestart] = restart
	b.Handlers[world.EvPartitionTick] = partitionTick
	b.Handlers[world.EvProducerCrash] = crashProducer
	b.Handlers[world.EvProducerChaos] = producerChaos
	b.Handlers[world.EvProducerRestart] = producerRestart
	b.Handlers[world.EvDecodeArrive] = onDecoder
	b.Handlers[world.EvKVFetchReply] = onDecoder
	b.Handlers[world.EvDecodeFetchDeadline] = onDecoder
	b.Handlers[world.EvKVFetchArrive] = kvFetchArrive
	b.Handlers[world.EvDecodeReplyArrive] = decodeReplyArrive
	b.Handlers[world.EvKVAbortReplyArrive] = decodeReplyArrive
	b.Handlers[world.EvKVAbortArrive] = kvAbortArrive
	b.Handlers[world.EvKVExpire] = kvExpire
	return b
}
