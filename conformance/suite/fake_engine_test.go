package suite

// A small in-memory implementation of the baton.encoder.v1 roles (producer,
// consumer, baseline) that follows CONTRACT, used to check the cases
// themselves: every case must pass against it, and each mutant (one
// decision broken on purpose) must be caught by the case named after the
// rule it breaks. It is test scaffolding for the harness, not an engine:
// one mutex, no transfers, a toy "model" whose answer is a hash of the
// prompt and the images' content hashes.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	_ "golang.org/x/image/webp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// fakeMutant breaks one decision of the fake each; the zero value is the
// conforming fake.
type fakeMutant struct {
	replayAllowed      bool // consumer never marks an entry consumed (SU-1, SU-2)
	ignoreExpiry       bool // consumer accepts expired entries (SU-2)
	abortAlwaysAborted bool // Abort answers ABORTED for released/consumed entries (SU-3)
	noTagCheck         bool // nobody verifies the tag (SU-4, SU-5)
	abortNoTagCheck    bool // the producer's Abort does not verify the tag: a forged one releases (SU-4)
	idFromCounter      bool // reference ids are a counter (SU-5)
	pathIDAccepted     bool // an id that is not 32 hex is looked up anyway and answers INTERNAL (SU-5)
	noSizeCheck        bool // no 64 KiB bound on opaque_state (L-1)
	videoAccepted      bool // video/audio decoded as images (L-3)
	producerGenerates  bool // text-only requests to the producer get tokens (L-4)
	quotaIgnored       bool // the producer never refuses a publish (L-5)
	urlInvalid         bool // url sources answer INVALID_ARGUMENT, not UNIMPLEMENTED (L-6)
	bombDecoded        bool // no pixel bound: bombs are "decoded" and published (L-6)
	backendUnchecked   bool // consumer accepts any backend (N-1)
	spentBeforeBackend bool // consumer checks SU-2 before N-1 (N-1 precedence)
	shutdownAnyID      bool // Shutdown accepts any non-empty id (S-1)
	usageCountsEncoder bool // consumer usage counts the encoder's rows once more (B-1)
	textKeyedCache     bool // consumer prefix cache keyed by the prompt alone (B-2)
	uuidIsIdentity     bool // a MediaItem.uuid replaces the content hash (H-5)
	hashCaseFolded     bool // content hashes checked case-insensitively and the tag is not checked (H-3)
	idFromContent      bool // entry ids derive from the content hashes; a second publish overwrites the first (SU-6)
	noCollection       bool // expired entries are never collected
	hashWireBytes      bool // the content hash is taken over the wire bytes (H-1, H-4)
	perConsumerClaims  bool // each consumer process keeps its own record of what it consumed (SU-1 across processes)
	hashWithoutDims    bool // the producer's published hash leaves out width and height (B-2 near pairs; H-1)
}

const (
	fakeBackend     = "shared_dir"
	fakeRows        = 8
	fakeCols        = 16
	fakeEntryBytes  = fakeRows * fakeCols * 4 // 512 bytes per image item
	fakeDefaultTTL  = 60 * time.Second
	fakeMaxPixels   = 40_000_000
	fakeMaxRefDepth = 3
	fakePreset      = "fake"                // the preset the fake declares in ServerInfo.extra (H-1)
	fakeLinger      = 50 * time.Millisecond // how long a shut-down fake still answers Health
)

type fakeEntry struct {
	items    []fakeItem
	seeds    []string // the items' true content hashes: what the toy model answers from
	expMs    int64
	state    string // "published", "consumed", "released", "expired"
	payloadB int64
}

type fakeItem struct {
	Hash string `json:"hash"`
	Rows uint32 `json:"rows"`
	Cols uint32 `json:"cols"`
}

// fakeWorld is the shared state of one fake target.
type fakeWorld struct {
	mu       sync.Mutex
	m        fakeMutant
	key      []byte
	ids      map[target.Role]string
	down     map[target.Role]bool
	downAt   map[target.Role]time.Time
	entries  map[string]*fakeEntry
	bytes    int64
	quota    int64
	counter  int
	cache    map[target.Role]map[string][]uint32 // prefix cache of each generating role
	inflight int
	// restarted lists the roles restartableTarget restarted, in order.
	restarted []target.Role
	// requiredFormatsOnly: the fake decodes PNG and JPEG only (a
	// conforming engine without the optional formats).
	requiredFormatsOnly bool
	// claimedBy records, for perConsumerClaims, which consumer roles
	// consumed each entry.
	claimedBy map[string]map[target.Role]bool
}

func newFakeWorld(m fakeMutant, quotaBytes int64) *fakeWorld {
	w := &fakeWorld{
		m: m, key: []byte("fake-key"), quota: quotaBytes,
		ids:       map[target.Role]string{},
		down:      map[target.Role]bool{},
		downAt:    map[target.Role]time.Time{},
		entries:   map[string]*fakeEntry{},
		cache:     map[target.Role]map[string][]uint32{target.RoleConsumer: {}, target.RoleSecondConsumer: {}, target.RoleBaseline: {}, target.RoleProducer: {}},
		claimedBy: map[string]map[target.Role]bool{},
	}
	for _, r := range []target.Role{target.RoleProducer, target.RoleConsumer, target.RoleSecondConsumer, target.RoleBaseline} {
		w.ids[r] = newUUID()
	}
	return w
}

// fakeTarget builds a Static target over the world's engines: producer,
// consumer, a second consumer process and the baseline.
func (w *fakeWorld) target(p target.Profile) target.Target {
	p.Restarts = true
	return restartableTarget{target.NewStatic(p, map[target.Role]target.Engine{
		target.RoleProducer:       &fakeEngine{w, target.RoleProducer},
		target.RoleConsumer:       &fakeEngine{w, target.RoleConsumer},
		target.RoleSecondConsumer: &fakeEngine{w, target.RoleSecondConsumer},
		target.RoleBaseline:       &fakeEngine{w, target.RoleBaseline},
	}), w}
}

// restartableTarget is the fake's target: a Restarter whose restart brings
// a shut-down role back with a new instance id (as a launch section does).
type restartableTarget struct {
	target.Target
	w *fakeWorld
}

// Restart implements target.Restarter.
func (r restartableTarget) Restart(_ context.Context, role target.Role) error {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.down[role] = false
	r.w.ids[role] = newUUID()
	r.w.restarted = append(r.w.restarted, role)
	return nil
}

// isConsumer reports whether role is one of the fake's consumer processes.
func isConsumer(role target.Role) bool {
	return role == target.RoleConsumer || role == target.RoleSecondConsumer
}

type fakeEngine struct {
	w    *fakeWorld
	role target.Role
}

func nowMs() int64 { return time.Now().UnixMilli() }

type rejection struct {
	code codes.Code
	msg  string
}

func (r *rejection) Error() string { return r.msg }

func reject(c codes.Code, format string, args ...any) *rejection {
	return &rejection{c, fmt.Sprintf(format, args...)}
}

func failed(err *rejection) *target.GenerateResult {
	return &target.GenerateResult{Status: status.New(err.code, err.msg), Trailer: metadata.MD{}}
}

// Generate implements target.Engine.
func (e *fakeEngine) Generate(ctx context.Context, req *pb.GenerateRequest) (*target.GenerateResult, error) {
	if err := ctx.Err(); err != nil {
		return failed(reject(codes.DeadlineExceeded, "context: %v", err)), nil
	}
	w := e.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.down[e.role] {
		return failed(reject(codes.Unavailable, "S-2 draining")), nil
	}
	w.collect()
	var res *target.GenerateResult
	var rej *rejection
	switch e.role {
	case target.RoleProducer:
		res, rej = e.producerGenerate(req)
	case target.RoleConsumer, target.RoleSecondConsumer:
		res, rej = e.consumerGenerate(req)
	default:
		res, rej = e.baselineGenerate(req)
	}
	if rej != nil {
		return failed(rej), nil
	}
	return res, nil
}

func (e *fakeEngine) producerGenerate(req *pb.GenerateRequest) (*target.GenerateResult, *rejection) {
	w := e.w
	if req.GetEncoder().GetConsume() != nil {
		return nil, reject(codes.FailedPrecondition, "L-4 consume sent to the producer")
	}
	pub := req.GetEncoder().GetPublish()
	if pub == nil {
		if w.m.producerGenerates && len(req.GetMedia()) == 0 {
			return w.answer(target.RoleProducer, req.GetPrompt(), nil, 0), nil
		}
		return nil, reject(codes.FailedPrecondition, "L-4 the producer only publishes")
	}
	if len(req.GetMedia()) == 0 {
		return nil, reject(codes.InvalidArgument, "publish without media")
	}
	items := make([]fakeItem, 0, len(req.GetMedia()))
	var seeds []string
	for _, m := range req.GetMedia() {
		hash, img, rej := w.decodeImage(m)
		if rej != nil {
			return nil, rej
		}
		seeds = append(seeds, hash)
		if w.m.hashWithoutDims && img != nil {
			hash = dimensionBlindHash(img)
		}
		items = append(items, fakeItem{Hash: hash, Rows: fakeRows, Cols: fakeCols})
	}
	payload := int64(len(items) * fakeEntryBytes)
	if !w.m.quotaIgnored && w.quota > 0 && w.bytes+payload > w.quota {
		return nil, reject(codes.ResourceExhausted, "L-5 quota")
	}
	ttl := fakeDefaultTTL
	if pub.TtlMs != nil {
		ttl = time.Duration(pub.GetTtlMs()) * time.Millisecond
	}
	w.counter++
	var id string
	if w.m.idFromCounter {
		id = fmt.Sprintf("%032x", w.counter)
	} else if w.m.idFromContent {
		sum := sha256.Sum256([]byte(fmt.Sprint(items)))
		id = hex.EncodeToString(sum[:16])
		ttl += time.Duration(w.counter) * time.Millisecond // a distinct reference each time
		if old := w.entries[id]; old != nil && old.state == "published" {
			w.bytes -= old.payloadB
		}
	} else {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	exp := nowMs() + ttl.Milliseconds()
	w.entries[id] = &fakeEntry{items: items, seeds: seeds, expMs: exp, state: "published", payloadB: payload}
	w.bytes += payload
	ref := &pb.EncoderCacheRef{Backend: fakeBackend, ProducerInstanceId: w.ids[target.RoleProducer], OpaqueState: w.seal(fakeBackend, w.ids[target.RoleProducer], nil, id, exp, items)}
	ready := &pb.EncoderReady{Ref: ref}
	for _, it := range items {
		ready.Items = append(ready.Items, &pb.EncodedItem{ContentHash: it.Hash, EmbeddingRows: it.Rows, Modality: pb.Modality_MODALITY_IMAGE})
	}
	return &target.GenerateResult{
		Responses: []*pb.GenerateResponse{{RequestId: req.GetRequestId(), Event: &pb.GenerateResponse_EncoderReady{EncoderReady: ready}, Usage: &pb.Usage{}}},
		Status:    status.New(codes.OK, ""), Trailer: metadata.MD{},
	}, nil
}

func (e *fakeEngine) consumerGenerate(req *pb.GenerateRequest) (*target.GenerateResult, *rejection) {
	w := e.w
	if req.GetEncoder().GetPublish() != nil || len(req.GetMedia()) > 0 {
		return nil, reject(codes.FailedPrecondition, "L-4 the consumer takes references, not media")
	}
	ref := req.GetEncoder().GetConsume()
	if ref == nil {
		return w.answer(e.role, req.GetPrompt(), nil, 0), nil
	}
	id, items, rej := w.verify(ref, true)
	if rej != nil {
		return nil, rej
	}
	ent := w.entries[id]
	if ent == nil {
		return nil, reject(codes.InvalidArgument, "SU-5 no such entry")
	}
	if !w.m.ignoreExpiry && ent.state == "published" && nowMs() >= ent.expMs {
		ent.state = "expired"
		w.bytes -= ent.payloadB
	}
	if w.m.perConsumerClaims && ent.state == "consumed" && !w.claimedBy[id][e.role] {
		// The SU-1 mutant: this process never consumed it, so it does.
		w.claimedBy[id][e.role] = true
	} else {
		if ent.state != "published" && !w.m.replayAllowed {
			return nil, reject(codes.InvalidArgument, "SU-2 spent (%s)", ent.state)
		}
		if ent.state == "published" {
			ent.state = "consumed"
			w.bytes -= ent.payloadB
			w.claimedBy[id] = map[target.Role]bool{e.role: true}
		}
	}
	hashes := make([]string, len(items))
	for i, it := range items {
		hashes[i] = it.Hash
	}
	extra := uint32(0)
	if w.m.usageCountsEncoder {
		extra = 1
	}
	return w.answerFrom(e.role, req.GetPrompt(), hashes, ent.seeds, extra), nil
}

func (e *fakeEngine) baselineGenerate(req *pb.GenerateRequest) (*target.GenerateResult, *rejection) {
	w := e.w
	if req.GetEncoder() != nil {
		return nil, reject(codes.FailedPrecondition, "L-4 the baseline neither publishes nor consumes")
	}
	var hashes []string
	for _, m := range req.GetMedia() {
		hash, rej := w.decode(m)
		if rej != nil {
			return nil, rej
		}
		hashes = append(hashes, hash)
	}
	return w.answer(target.RoleBaseline, req.GetPrompt(), hashes, 0), nil
}

// decode validates one media item (L-3, L-6) and returns its content hash.
func (w *fakeWorld) decode(m *pb.MediaItem) (string, *rejection) {
	hash, _, rej := w.decodeImage(m)
	return hash, rej
}

// decodeImage is decode, also returning the decoded image (nil for a
// bomb the bombDecoded mutant "decodes").
func (w *fakeWorld) decodeImage(m *pb.MediaItem) (string, image.Image, *rejection) {
	hash, img, rej := w.decodeItem(m)
	return hash, img, rej
}

// decodeItem does the work of decode.
func (w *fakeWorld) decodeItem(m *pb.MediaItem) (string, image.Image, *rejection) {
	if (m.GetModality() == pb.Modality_MODALITY_VIDEO || m.GetModality() == pb.Modality_MODALITY_AUDIO) && !w.m.videoAccepted {
		return "", nil, reject(codes.Unimplemented, "L-3 %s", m.GetModality())
	}
	var data []byte
	switch src := m.GetSource().(type) {
	case *pb.MediaItem_Url:
		if w.m.urlInvalid {
			return "", nil, reject(codes.InvalidArgument, "L-6 url")
		}
		return "", nil, reject(codes.Unimplemented, "L-6 url fetching disabled")
	case *pb.MediaItem_DataUri:
		rest, ok := strings.CutPrefix(src.DataUri, "data:")
		meta, payload, ok2 := strings.Cut(rest, ",")
		if !ok || !ok2 || !strings.HasSuffix(meta, ";base64") {
			return "", nil, reject(codes.InvalidArgument, "L-6 bad data URI")
		}
		b, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			return "", nil, reject(codes.InvalidArgument, "L-6 bad data URI: %v", err)
		}
		data = b
	case *pb.MediaItem_RawBytes:
		data = src.RawBytes
	default:
		return "", nil, reject(codes.InvalidArgument, "L-6 no source")
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return "", nil, reject(codes.InvalidArgument, "L-6 undecodable: %v", err)
	}
	if w.requiredFormatsOnly && format != "png" && format != "jpeg" {
		return "", nil, reject(codes.InvalidArgument, "cannot decode image: unknown image format")
	}
	if int64(cfg.Width)*int64(cfg.Height) > fakeMaxPixels {
		if w.m.bombDecoded {
			sum := sha256.Sum256(data)
			return hex.EncodeToString(sum[:]), nil, nil
		}
		return "", nil, reject(codes.InvalidArgument, "L-6 %dx%d over the pixel bound", cfg.Width, cfg.Height)
	}
	if strictFixture(data) {
		return "", nil, reject(codes.InvalidArgument, "L-6 not strictly well-formed")
	}
	if format == "jpeg" && fakeJPEGScans(data) > fakeMaxJPEGScans {
		return "", nil, reject(codes.InvalidArgument, "L-6 a JPEG of more than %d scans", fakeMaxJPEGScans)
	}
	img, hash, err := decodeCached(data)
	if err != nil {
		return "", nil, reject(codes.InvalidArgument, "L-6 undecodable: %v", err)
	}
	if w.m.uuidIsIdentity && m.GetUuid() != "" {
		sum := sha256.Sum256([]byte(m.GetUuid()))
		return hex.EncodeToString(sum[:]), img, nil
	}
	if w.m.hashWireBytes {
		sum := sha256.Sum256(data)
		return hex.EncodeToString(sum[:]), img, nil
	}
	return hash, img, nil
}

// answer is the toy model: maxTokens ids drawn from a hash of the prompt
// and the item identities, through a prefix cache keyed by both.
func (w *fakeWorld) answer(role target.Role, prompt string, hashes []string, extraPrompt uint32) *target.GenerateResult {
	return w.answerFrom(role, prompt, hashes, hashes, extraPrompt)
}

// answerFrom is answer with the cache keyed by the identities hashes and
// the answer drawn from seeds, the items' true content hashes (a consumer
// answers from the embeddings it received; it keys its cache by the hashes
// the reference carries).
func (w *fakeWorld) answerFrom(role target.Role, prompt string, hashes, seeds []string, extraPrompt uint32) *target.GenerateResult {
	key := prompt + "\x00" + strings.Join(hashes, ",")
	if w.m.textKeyedCache && isConsumer(role) && len(hashes) > 0 {
		key = prompt
	}
	cache := w.cache[role]
	ids, ok := cache[key]
	if !ok {
		seed := sha256.Sum256([]byte(prompt + "\x00" + strings.Join(seeds, ",")))
		for i := 0; i < maxTokens; i++ {
			ids = append(ids, binary.BigEndian.Uint32(seed[(i%8)*4:])%1000+uint32(i))
		}
		cache[key] = ids
	}
	var toks []*pb.TokenInfo
	for _, id := range ids {
		toks = append(toks, &pb.TokenInfo{TokenId: id, Token: fmt.Sprint(id)})
	}
	promptTokens := uint32(len(strings.Fields(prompt))+fakeRows*len(hashes)) + extraPrompt
	usage := &pb.Usage{PromptTokens: promptTokens, CompletionTokens: uint32(len(ids)), TotalTokens: promptTokens + uint32(len(ids))}
	return &target.GenerateResult{
		Responses: []*pb.GenerateResponse{
			{Event: &pb.GenerateResponse_Token{Token: &pb.TokenOutput{Tokens: toks}}},
			{Event: &pb.GenerateResponse_Finished{Finished: &pb.GenerationFinished{Reason: pb.FinishReason_FINISH_REASON_LENGTH}}, Usage: usage},
		},
		Status: status.New(codes.OK, ""), Trailer: metadata.MD{},
	}
}

var (
	fakeIDPattern   = regexp.MustCompile(`^[0-9a-f]{32}$`)
	fakeHashPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
	fakeUUIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

type fakeWireRef struct {
	V     *int       `json:"v"`
	ID    *string    `json:"id"`
	Exp   *int64     `json:"exp"`
	Items []fakeItem `json:"items"`
	Tag   *string    `json:"tag"`
}

// tag is the fake's integrity tag: an HMAC over every field of the
// reference but itself (CONTRACT SU-5), the producer endpoint included.
func (w *fakeWorld) tag(backend, instance string, endpoint *pb.KvEndpoint, id string, exp int64, items []fakeItem) string {
	mac := hmac.New(sha256.New, w.key)
	ep := "-"
	if endpoint != nil {
		ep = fmt.Sprintf("%s:%d/%s", endpoint.GetHost(), endpoint.GetPort(), endpoint.GetProtocol())
	}
	fmt.Fprintf(mac, "%s\x00%s\x00%s\x00%s\x00%d", backend, instance, ep, id, exp)
	for _, it := range items {
		fmt.Fprintf(mac, "\x00%s:%d:%d", it.Hash, it.Rows, it.Cols)
	}
	return hex.EncodeToString(mac.Sum(nil))
}

func (w *fakeWorld) seal(backend, instance string, endpoint *pb.KvEndpoint, id string, exp int64, items []fakeItem) []byte {
	v, tag := 1, w.tag(backend, instance, endpoint, id, exp, items)
	out, _ := json.Marshal(fakeWireRef{V: &v, ID: &id, Exp: &exp, Items: items, Tag: &tag})
	return out
}

// verify checks a reference in the contract's order (L-1, SU-4, N-1,
// SU-5/H-3, tag) and returns its id and items. consumer selects the
// consumer's backend check.
func (w *fakeWorld) verify(ref *pb.EncoderCacheRef, consumer bool) (string, []fakeItem, *rejection) {
	op := ref.GetOpaqueState()
	if len(op) > maxReferenceBytes && !w.m.noSizeCheck {
		return "", nil, reject(codes.InvalidArgument, "L-1 %d bytes", len(op))
	}
	if jsonDepth(op) > fakeMaxRefDepth {
		return "", nil, reject(codes.InvalidArgument, "SU-4 too deep")
	}
	dec := json.NewDecoder(bytes.NewReader(op))
	dec.DisallowUnknownFields()
	var r fakeWireRef
	if err := dec.Decode(&r); err != nil {
		return "", nil, reject(codes.InvalidArgument, "SU-4 %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", nil, reject(codes.InvalidArgument, "SU-4 trailing data")
	}
	if r.V == nil || r.ID == nil || r.Exp == nil || r.Tag == nil || len(r.Items) == 0 || *r.V != 1 || !fakeHashPattern.MatchString(*r.Tag) {
		return "", nil, reject(codes.InvalidArgument, "SU-4 shape")
	}
	if consumer && w.m.spentBeforeBackend {
		if ent := w.entries[*r.ID]; ent != nil && ent.state != "published" {
			return "", nil, reject(codes.InvalidArgument, "SU-2 spent (checked too early)")
		}
	}
	if consumer && ref.GetBackend() != fakeBackend && !w.m.backendUnchecked {
		return "", nil, reject(codes.FailedPrecondition, "N-1 backend %q", ref.GetBackend())
	}
	if !fakeIDPattern.MatchString(*r.ID) {
		if w.m.pathIDAccepted {
			return "", nil, reject(codes.Internal, "open %s: no such file", *r.ID)
		}
		return "", nil, reject(codes.InvalidArgument, "SU-5 id")
	}
	if !fakeUUIDPattern.MatchString(ref.GetProducerInstanceId()) {
		return "", nil, reject(codes.InvalidArgument, "SU-5 instance")
	}
	for _, it := range r.Items {
		h := it.Hash
		if w.m.hashCaseFolded {
			h = strings.ToLower(h)
		}
		if !fakeHashPattern.MatchString(h) {
			return "", nil, reject(codes.InvalidArgument, "H-3 hash")
		}
	}
	if ref.GetProducerInstanceId() != w.ids[target.RoleProducer] {
		return "", nil, reject(codes.InvalidArgument, "SU-5 another instance")
	}
	skipTag := w.m.noTagCheck || w.m.hashCaseFolded || (!consumer && w.m.abortNoTagCheck)
	if !skipTag && w.tag(ref.GetBackend(), ref.GetProducerInstanceId(), ref.GetProducerEndpoint(), *r.ID, *r.Exp, r.Items) != *r.Tag {
		return "", nil, reject(codes.InvalidArgument, "SU-5 tag does not verify")
	}
	if !skipTag && !bytes.Equal(op, w.seal(ref.GetBackend(), ref.GetProducerInstanceId(), ref.GetProducerEndpoint(), *r.ID, *r.Exp, r.Items)) {
		return "", nil, reject(codes.InvalidArgument, "SU-5 bytes outside the tag were altered")
	}
	return *r.ID, r.Items, nil
}

// decoded is one image the fake decoded, and its content hash.
type decoded struct {
	img  image.Image
	hash string
	err  error
}

// decodeCache keeps every image the fakes decoded, by the SHA-256 of its
// bytes: the suite's tests send the same fixtures to hundreds of fake
// worlds, and decoding and hashing them again is most of their time under
// the race detector.
var decodeCache sync.Map // [32]byte -> decoded

// decodeCached decodes data (image.Decode) and returns the image and its
// H-1 content hash under fakePreset, from decodeCache when it was seen.
func decodeCached(data []byte) (image.Image, string, error) {
	key := sha256.Sum256(data)
	if d, ok := decodeCache.Load(key); ok {
		return d.(decoded).img, d.(decoded).hash, d.(decoded).err
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	d := decoded{img: img, err: err}
	if err == nil {
		d.hash = fixtures.ContentHash(fakePreset, img)
	}
	decodeCache.Store(key, d)
	return d.img, d.hash, d.err
}

// dimensionBlindHash is the hashWithoutDims mutant's content hash: SHA-256
// of the decoded 8-bit RGBA pixel bytes alone, so the same bytes in other
// dimensions hash equal.
func dimensionBlindHash(img image.Image) string {
	b := img.Bounds()
	h := sha256.New()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			h.Write([]byte{byte(r >> 8), byte(g >> 8), byte(bl >> 8), byte(a >> 8)})
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// collect expires published entries past their TTL.
func (w *fakeWorld) collect() {
	if w.m.noCollection {
		return
	}
	now := nowMs()
	for _, ent := range w.entries {
		if ent.state == "published" && now >= ent.expMs && !w.m.ignoreExpiry {
			ent.state = "expired"
			w.bytes -= ent.payloadB
		}
	}
}

func (e *fakeEngine) GetServerInfo(ctx context.Context) (*pb.ServerInfo, error) {
	extra, _ := structpb.NewStruct(map[string]any{"baton.preset": fakePreset})
	return &pb.ServerInfo{InstanceId: e.w.ids[e.role], SchemaRevision: 1, Extra: extra}, nil
}

func (e *fakeEngine) GetModelInfo(ctx context.Context, model string) (*pb.ModelInfo, error) {
	caps := &pb.EncoderCapabilities{Role: pb.EncoderRole_ENCODER_ROLE_NONE}
	switch e.role {
	case target.RoleProducer:
		caps = &pb.EncoderCapabilities{Role: pb.EncoderRole_ENCODER_ROLE_PRODUCER, Backends: []string{fakeBackend}, SupportsAbortCleanup: proto.Bool(true)}
	case target.RoleConsumer, target.RoleSecondConsumer:
		caps = &pb.EncoderCapabilities{Role: pb.EncoderRole_ENCODER_ROLE_CONSUMER, Backends: []string{fakeBackend}, RequiresHandoff: proto.Bool(true)}
	}
	return &pb.ModelInfo{ModelId: "fake", Encoder: caps}, nil
}

func (e *fakeEngine) GetLoad(ctx context.Context) (*pb.LoadInfo, error) {
	w := e.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.collect()
	vals := map[string]any{}
	for _, k := range Observables() {
		vals[k] = 0.0
	}
	if e.role == target.RoleProducer {
		n := 0
		for _, ent := range w.entries {
			if ent.state == "published" {
				n++
			}
		}
		vals[ObservableExportsEntries] = float64(n)
		vals[ObservableExportsBytes] = float64(w.bytes)
	}
	if isConsumer(e.role) {
		vals[ObservableReceivesInflight] = float64(w.inflight)
	}
	attrs, err := structpb.NewStruct(vals)
	if err != nil {
		return nil, err
	}
	return &pb.LoadInfo{InstanceId: w.ids[e.role], Attributes: attrs}, nil
}

func (e *fakeEngine) Health(ctx context.Context) (*pb.HealthResponse, error) {
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	if e.w.down[e.role] {
		// The fake drains at once; its "process" leaves fakeLinger later.
		if time.Since(e.w.downAt[e.role]) > fakeLinger {
			return nil, status.Error(codes.Unavailable, "connection refused (the fake exited)")
		}
		return &pb.HealthResponse{State: pb.HealthState_HEALTH_STATE_DRAINING}, nil
	}
	return &pb.HealthResponse{State: pb.HealthState_HEALTH_STATE_READY}, nil
}

func (e *fakeEngine) Abort(ctx context.Context, req *pb.AbortRequest) (*pb.AbortResponse, error) {
	w := e.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if e.role != target.RoleProducer {
		return nil, status.Error(codes.FailedPrecondition, "L-4 only the producer releases")
	}
	ref := req.GetEncoderCache()
	if ref == nil {
		return nil, status.Error(codes.InvalidArgument, "no target")
	}
	w.collect()
	id, _, rej := w.verify(ref, false)
	if rej != nil {
		return nil, status.Error(rej.code, rej.msg)
	}
	ent := w.entries[id]
	if ent == nil {
		return &pb.AbortResponse{Status: pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED}, nil
	}
	if ent.state == "published" {
		ent.state = "released"
		w.bytes -= ent.payloadB
		return &pb.AbortResponse{Status: pb.AbortStatus_ABORT_STATUS_ABORTED}, nil
	}
	if w.m.abortAlwaysAborted {
		return &pb.AbortResponse{Status: pb.AbortStatus_ABORT_STATUS_ABORTED}, nil
	}
	return &pb.AbortResponse{Status: pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED}, nil
}

func (e *fakeEngine) Shutdown(ctx context.Context, req *pb.ShutdownRequest) (*pb.ShutdownResponse, error) {
	w := e.w
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case req.GetExpectedInstanceId() == "":
		return nil, status.Error(codes.InvalidArgument, "S-1 empty id")
	case req.GetExpectedInstanceId() != w.ids[e.role] && !w.m.shutdownAnyID:
		return nil, status.Error(codes.FailedPrecondition, "S-1 another instance")
	case w.down[e.role]:
		return &pb.ShutdownResponse{Status: pb.ShutdownStatus_SHUTDOWN_STATUS_ALREADY_SHUTTING_DOWN}, nil
	}
	w.down[e.role] = true
	w.downAt[e.role] = time.Now()
	if e.role == target.RoleProducer {
		for _, ent := range w.entries { // S-2: unconsumed outputs are released
			if ent.state == "published" {
				ent.state = "released"
				w.bytes -= ent.payloadB
			}
		}
	}
	return &pb.ShutdownResponse{Status: pb.ShutdownStatus_SHUTDOWN_STATUS_ACCEPTED}, nil
}

// fakeMaxJPEGScans bounds a JPEG's scans before the fake decodes it, as
// the reference engine does (encoder.MaxJPEGScans): Go's decoder walks the
// image once a scan, and the SE-4 scan-bomb case's JPEGs of 18001 scans
// would cost every fake world about 25 s of CPU each.
const fakeMaxJPEGScans = 32

// fakeJPEGScans counts the scans (SOS segments) of a JPEG by walking its
// marker segments from SOI, each scan's entropy-coded data up to the next
// marker that is neither stuffing nor a restart marker; it stops at EOI or
// where the stream is malformed (the decoder then refuses it).
func fakeJPEGScans(b []byte) int {
	scans, off := 0, 2
	for off+4 <= len(b) && b[off] == 0xff {
		for off < len(b)-1 && b[off] == 0xff {
			off++
		}
		m := b[off]
		if m == 0xd9 || off+3 > len(b) {
			break
		}
		n := int(b[off+1])<<8 | int(b[off+2]) // the segment's length, its own 2 bytes included
		off += 1 + n
		if m != 0xda {
			continue
		}
		scans++
		for off+1 < len(b) && !(b[off] == 0xff && b[off+1] != 0 && (b[off+1] < 0xd0 || b[off+1] > 0xd7)) {
			off++
		}
	}
	return scans
}

// strictFixture reports whether data is a fixture Go's lenient decoders
// accept but a strict decoder rejects (fixtures.WantStrict): the fake has no
// strict decoder of its own (the reference engine's is engine/encoder's).
func strictFixture(data []byte) bool {
	for _, m := range fixtures.Malformed() {
		if m.Want == fixtures.WantStrict && bytes.Equal(m.Data, data) {
			return true
		}
	}
	return false
}
