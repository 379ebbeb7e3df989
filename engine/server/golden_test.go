package server

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

var rewriteGolden = flag.Bool("rewrite", false, "rewrite fixtures/golden/answers.json from the aggregated engine")

// goldenAnswer is one expected answer of the aggregated engine (tiny preset).
type goldenAnswer struct {
	Images           []string `json:"images"`
	Prompt           string   `json:"prompt"`
	Text             string   `json:"text"`
	TokenIDs         []uint32 `json:"token_ids"`
	PromptTokens     uint32   `json:"prompt_tokens"`
	CompletionTokens uint32   `json:"completion_tokens"`
}

// TestGoldenAnswers pins the reference engine's answers on the fixture images
// and prompts: any change to decoding, hashing, the encoder or the model shows
// up here. Regenerate with `go test ./engine/server -run TestGoldenAnswers -rewrite`.
func TestGoldenAnswers(t *testing.T) {
	_, baseline := startEngine(t, Config{Role: RoleAggregated})
	ctx := context.Background()
	var got []goldenAnswer
	images := fixtures.Images()
	for _, p := range fixtures.Prompts() {
		if p.Images > 1 {
			continue
		}
		sets := [][]fixtures.Image{nil}
		if p.Images == 1 {
			sets = nil
			for _, im := range images {
				sets = append(sets, []fixtures.Image{im})
			}
		}
		for _, set := range sets {
			req := &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: p.Text}, Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(32)}}
			a := goldenAnswer{Prompt: p.Name, Images: []string{}}
			for _, im := range set {
				req.Media = append(req.Media, &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: im.Data}})
				a.Images = append(a.Images, im.Name)
			}
			res, err := baseline.Generate(ctx, req)
			if err != nil || res.Code() != codes.OK {
				t.Fatalf("%s %v: %v %v", p.Name, a.Images, res.Status, err)
			}
			a.Text, a.TokenIDs = res.Text(), res.TokenIDs()
			a.PromptTokens, a.CompletionTokens = res.Usage().GetPromptTokens(), res.Usage().GetCompletionTokens()
			got = append(got, a)
			if p.Name == "dominant-colour" && len(set) == 1 {
				break // one image prompt over all images is enough; the others over the first
			}
		}
	}
	path := filepath.Join("..", "..", "fixtures", "golden", "answers.json")
	if *rewriteGolden {
		b, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s (%d answers)", path, len(got))
		return
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate with -rewrite)", err)
	}
	var want []goldenAnswer
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(got) {
		t.Fatalf("%d answers, golden file has %d (regenerate with -rewrite if the change is intended)", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Text != w.Text || g.PromptTokens != w.PromptTokens || g.CompletionTokens != w.CompletionTokens || g.Prompt != w.Prompt {
			t.Errorf("answer %d (%s %v) = %q (%d+%d tokens); golden %q (%d+%d)", i, w.Prompt, w.Images, g.Text, g.PromptTokens, g.CompletionTokens, w.Text, w.PromptTokens, w.CompletionTokens)
		}
	}
}
