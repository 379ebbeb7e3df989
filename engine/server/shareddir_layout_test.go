package server

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/handoff"
	"google.golang.org/grpc/codes"
)

// TestSharedDirLayoutMatchesTheDocs: a producer on an operator's 1777
// directory leaves its mode alone, writes the entry file docs/implementing.md
// section 4.3 describes (the metadata keys of fixtures/vectors/entry.json,
// tensors item.<i> F32 [rows, cols]) and seals a reference that verifies
// over the producer_endpoint it advertised; a consumer of the same user
// claims it.
func TestSharedDirLayoutMatchesTheDocs(t *testing.T) {
	root := t.TempDir()
	if err := os.Chmod(root, fs.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	prodSrv, producer := startEngine(t, Config{Role: RoleEncoder, CacheDir: root})
	_, consumer := startEngine(t, Config{Role: RolePD, CacheDir: root})
	if info, err := os.Lstat(root); err != nil || info.Mode() != fs.ModeDir|fs.ModeSticky|0o777 {
		t.Fatalf("the producer changed the mode of a directory it did not create: %v, %v; want drwxrwxrwt", info.Mode(), err)
	}
	ctx := context.Background()
	res, err := producer.Generate(ctx, publishRequest(t, "layout"))
	if err != nil || res.Code() != codes.OK {
		t.Fatal(res.Status, err)
	}
	ref := res.EncoderReady().GetRef()
	parsed, err := handoff.ParseReference(ref.GetBackend(), ref.GetProducerInstanceId(), endpointOf(ref.GetProducerEndpoint()), ref.GetOpaqueState(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := parsed.Verify(prodSrv.Engine.store.Key()); err != nil {
		t.Fatalf("SU-5 the producer's own reference does not verify over its advertised endpoint %v: %v", ref.GetProducerEndpoint(), err)
	}
	inst := filepath.Join(root, ref.GetProducerInstanceId())
	names := []string{}
	des, err := os.ReadDir(inst)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		names = append(names, de.Name())
	}
	entry := parsed.EntryID + ".safetensors"
	if want := []string{entry, "hmac.key", "lock"}; !slices.Equal(names, want) {
		t.Errorf("instance directory holds %q, want %q", names, want)
	}
	data, err := os.ReadFile(filepath.Join(inst, entry))
	if err != nil {
		t.Fatal(err)
	}
	tensors, meta, err := shareddir.DecodeSafetensors(data, shareddir.DefaultMaxHeaderBytes)
	if err != nil {
		t.Fatal(err)
	}
	var vector struct {
		Metadata map[string]string `json:"metadata"`
	}
	raw, err := os.ReadFile("../../fixtures/vectors/entry.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &vector); err != nil {
		t.Fatal(err)
	}
	var gotKeys, wantKeys []string
	for k := range meta {
		gotKeys = append(gotKeys, k)
	}
	for k := range vector.Metadata {
		wantKeys = append(wantKeys, k)
	}
	sort.Strings(gotKeys)
	sort.Strings(wantKeys)
	if !slices.Equal(gotKeys, wantKeys) {
		t.Errorf("entry metadata keys %q, the documented vector has %q", gotKeys, wantKeys)
	}
	items, _ := json.Marshal(parsed.Items)
	for k, want := range map[string]string{"baton.format": vector.Metadata["baton.format"], "baton.entry_id": parsed.EntryID,
		"baton.producer_instance_id": ref.GetProducerInstanceId(), "baton.items": string(items), "baton.preset": "tiny"} {
		if meta[k] != want {
			t.Errorf("metadata %s = %q, want %q", k, meta[k], want)
		}
	}
	if len(tensors) != 1 || tensors[0].Name != "item.0" || tensors[0].DType != "F32" ||
		len(tensors[0].Shape) != 2 || tensors[0].Shape[0] != int(parsed.Items[0].Rows) || tensors[0].Shape[1] != int(parsed.Items[0].Cols) {
		t.Errorf("entry tensors %+v, want one item.0 F32 [%d, %d]", tensors, parsed.Items[0].Rows, parsed.Items[0].Cols)
	}
	got, _ := consumer.Generate(ctx, consumeRequest("layout", ref))
	if got.Code() != codes.OK || len(got.TokenIDs()) == 0 {
		t.Errorf("a consumer of the same user = %v with %d tokens; want tokens", got.Status, len(got.TokenIDs()))
	}
}
