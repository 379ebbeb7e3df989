package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"

	"github.com/baton-dev/baton/engine/contenthash"
	"github.com/baton-dev/baton/engine/encoder"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
)

// decodedImage is one media item after L-3/L-6 checks and decoding.
type decodedImage struct {
	img  image.Image
	hash string // content hash, CONTRACT H-1
	uuid string // MediaItem.uuid: an id, never the identity (H-5)
}

// checkModality is the L-3 decision: only images are served.
func checkModality(m pb.Modality) error {
	switch m {
	case pb.Modality_MODALITY_IMAGE:
		return nil
	case pb.Modality_MODALITY_VIDEO, pb.Modality_MODALITY_AUDIO:
		return fmt.Errorf("%w: L-3 %s items are not served", handoff.ErrModalityUnsupported, m)
	default:
		return fmt.Errorf("%w: L-6 media item modality %d is not MODALITY_IMAGE", handoff.ErrMediaRejected, m)
	}
}

// decodeMedia applies L-3 to every item first, then L-6 (source, bounds,
// decompression bombs from the header), reserves the decoded bytes in the
// engine's decode budget (SE-4: RESOURCE_EXHAUSTED when there is no room)
// and decodes, each image in a decode slot. Nothing is fetched: a url
// source is UNIMPLEMENTED (L-6). The caller must call release once the
// decoded images are no longer used (it is never nil).
func (e *Engine) decodeMedia(ctx context.Context, items []*pb.MediaItem) (images []decodedImage, release func(), err error) {
	release = func() {}
	images, err = e.decodeMediaBudgeted(ctx, items, &release)
	return images, release, err
}

func (e *Engine) decodeMediaBudgeted(ctx context.Context, items []*pb.MediaItem, release *func()) ([]decodedImage, error) {
	decisions := e.decisions()
	for _, it := range items {
		if err := handoff.AdmitModality(checkModality(it.GetModality()), decisions); err != nil { // L-3
			return nil, err
		}
	}
	if len(items) > MaxItemsPerRequest {
		return nil, fmt.Errorf("%w: L-6 %d media items, at most %d per request", handoff.ErrMediaRejected, len(items), MaxItemsPerRequest)
	}
	raw := make([][]byte, len(items))
	var totalPixels, totalBytes int64
	for i, it := range items {
		var data []byte
		switch src := it.GetSource().(type) {
		case *pb.MediaItem_Url:
			return nil, fmt.Errorf("%w: L-6 item %d: url sources are not fetched by this engine", handoff.ErrURLDisabled, i)
		case *pb.MediaItem_DataUri:
			b, _, err := encoder.DecodeDataURI(src.DataUri, e.cfg.MediaLimits)
			if err != nil {
				return nil, fmt.Errorf("%w: L-6 item %d: %v", handoff.ErrMediaRejected, i, err)
			}
			data = b
		case *pb.MediaItem_RawBytes:
			data = src.RawBytes
		default:
			return nil, fmt.Errorf("%w: L-6 item %d has no source", handoff.ErrMediaRejected, i)
		}
		raw[i] = data
		// Bound the request's decoded pixels from the headers before decoding
		// anything: each image is bounded by Decode, their sum here.
		if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil {
			totalPixels += int64(cfg.Width) * int64(cfg.Height)
			totalBytes += encoder.DecodePeakBytes(data, cfg.Width, cfg.Height) // SE-4: what decoding it holds, a progressive JPEG's coefficients included
		}
		if totalPixels > e.cfg.MaxRequestPixels {
			return nil, fmt.Errorf("%w: L-6 the request's images hold over %d pixels together", handoff.ErrMediaRejected, e.cfg.MaxRequestPixels)
		}
	}
	if len(raw) == 0 {
		return nil, nil
	}
	decodes := e.decodes
	if e.cfg.Hooks.NoDecodeBudget {
		decodes = unbounded
	}
	limits := e.cfg.MediaLimits
	if e.cfg.Hooks.NoJPEGScanBound {
		limits.MaxJPEGScans = noJPEGScanBound
	}
	rel, err := decodes.reserve(ctx, totalBytes)
	if err != nil {
		return nil, err
	}
	*release = rel
	out := make([]decodedImage, 0, len(items))
	for i, data := range raw {
		var img image.Image
		var hash string
		var derr error
		// The decode and the content hash (a pass over every pixel) run in
		// one of the budget's CPU slots (SE-4).
		if err := decodes.run(ctx, func() {
			if img, _, derr = encoder.Decode(data, limits); derr != nil {
				return
			}
			hash = contenthash.Of(e.preset.Name, data, img, e.cfg.Hooks.ContentHashing) // encoder.ContentHash, unless an H-1 or H-4 mutant
		}); err != nil {
			return nil, err // no decode slot within the wait (RESOURCE_EXHAUSTED), or the client went away
		}
		if derr != nil {
			return nil, fmt.Errorf("%w: L-6 item %d: %v", handoff.ErrMediaRejected, i, derr)
		}
		out = append(out, decodedImage{img: img, hash: hash, uuid: items[i].GetUuid()})
	}
	return out, nil
}

// noJPEGScanBound is the scan bound of the NoJPEGScanBound mutant
// (hooks.go): 2^30 scans, more than any request L-6 lets in holds (each
// scan takes at least 10 bytes), so in effect none.
const noJPEGScanBound = 1 << 30

// imageIdentity is the identity the model keys an image by: its content hash
// (H-1, H-5; lm.ImageIdentity, whose switch Hooks.Model breaks it).
func (e *Engine) imageIdentity(im decodedImage) string {
	return lm.ImageIdentity(im.uuid, im.hash, e.cfg.Hooks.Model)
}

// Per-request media bounds (CONTRACT L-6): the item count equals the items
// one reference may carry (handoff.MaxReferenceItems), and the decoded pixels
// of all items together are by default bounded like one image's
// (encoder.DefaultMaxPixels; Config.MaxRequestPixels lowers it), so one
// request cannot hold more than about 320 MiB of decoded images.
const (
	MaxItemsPerRequest = handoff.MaxReferenceItems
	MaxRequestPixels   = encoder.DefaultMaxPixels
)

var errDuplicateRequest = errors.New("server: request_id already in flight")
