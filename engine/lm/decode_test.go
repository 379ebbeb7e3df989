package lm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// baseline finds a prompt whose natural answer has at least 8 tokens and ends
// with EOS, so stopping cases can be derived from it.
func baseline(t *testing.T) (Request, answer) {
	t.Helper()
	m := New(Config{})
	for i := range 100 {
		req := Request{Prompt: fmt.Sprintf("Question %d?", i), MaxTokens: 1000}
		if a := generate(t, m, req); len(a.tokens) >= 8 && a.res.StopBy == StopByEOS {
			return req, a
		}
	}
	t.Fatal("no prompt with an answer of 8+ tokens")
	return Request{}, answer{}
}

func TestStopping(t *testing.T) {
	base, b := baseline(t)
	n := uint32(len(b.tokens))
	tok := func(i int) Token { return b.tokens[i] }
	firstIndex := func(id uint32) int { return slices.Index(ids(b.tokens), id) }
	end3 := len(Detokenize(ids(b.tokens[:4])))
	across := b.text[end3-1 : min(end3+2, len(b.text))] // last byte of token 3, then tokens 4 (and 5)
	textCut := func(stop string, include bool) string {
		i := strings.Index(b.text, stop)
		if include {
			return b.text[:i+len(stop)]
		}
		return b.text[:i]
	}
	t.Logf("baseline %q: %q (%d tokens)", base.Prompt, b.text, n)

	tests := []struct {
		name     string
		edit     func(r *Request)
		finish   FinishReason
		stopBy   StopKind
		wantText *string  // nil: not checked
		wantIDs  []uint32 // nil: not checked
		check    func(t *testing.T, a answer)
	}{
		{name: "EOS", edit: func(r *Request) {}, finish: FinishStop, stopBy: StopByEOS, wantIDs: ids(b.tokens)},
		{name: "max tokens", edit: func(r *Request) { r.MaxTokens = 3 }, finish: FinishLength, wantIDs: ids(b.tokens[:3])},
		{name: "default max tokens", edit: func(r *Request) { r.MaxTokens, r.IgnoreEOS = 0, true }, finish: FinishLength,
			check: func(t *testing.T, a answer) {
				if len(a.tokens) != DefaultMaxTokens {
					t.Errorf("%d tokens, want DefaultMaxTokens = %d", len(a.tokens), DefaultMaxTokens)
				}
			}},
		{name: "ignore EOS", edit: func(r *Request) { r.IgnoreEOS, r.MaxTokens = true, n+5 }, finish: FinishLength,
			check: func(t *testing.T, a answer) {
				if len(a.tokens) != int(n+5) || !slices.Equal(a.tokens[:n], b.tokens) {
					t.Errorf("got %q (%d tokens), want the baseline followed by 5 more", a.text, len(a.tokens))
				}
			}},
		{name: "min tokens suppress EOS", edit: func(r *Request) { r.MinTokens = n + 3 },
			check: func(t *testing.T, a answer) {
				if len(a.tokens) < int(n+3) || !slices.Equal(a.tokens[:n], b.tokens) {
					t.Errorf("got %q (%d tokens), want the baseline and at least 3 more", a.text, len(a.tokens))
				}
			}},
		{name: "stop token id", edit: func(r *Request) { r.StopTokenIDs = []uint32{tok(2).ID} }, finish: FinishStop, stopBy: StopByTokenID,
			wantIDs: ids(b.tokens[:firstIndex(tok(2).ID)])},
		{name: "stop token id included", edit: func(r *Request) { r.StopTokenIDs, r.IncludeStopInOutput = []uint32{tok(2).ID}, true },
			finish: FinishStop, stopBy: StopByTokenID, wantIDs: ids(b.tokens[:firstIndex(tok(2).ID)+1])},
		{name: "stop token id suppressed by min tokens", edit: func(r *Request) { r.StopTokenIDs, r.MinTokens = []uint32{tok(0).ID}, 2 },
			check: func(t *testing.T, a answer) {
				if len(a.tokens) < 2 || a.tokens[0].ID == tok(0).ID || a.tokens[1].ID == tok(0).ID {
					t.Errorf("got %v, want 2+ tokens, the first two not stop token %d", ids(a.tokens), tok(0).ID)
				}
			}},
		{name: "stop text, whole token", edit: func(r *Request) { r.StopTexts = []string{tok(3).Text} },
			finish: FinishStop, stopBy: StopByText, wantText: new(textCut(tok(3).Text, false))},
		{name: "stop text, whole token, included", edit: func(r *Request) { r.StopTexts, r.IncludeStopInOutput = []string{tok(3).Text}, true },
			finish: FinishStop, stopBy: StopByText, wantText: new(textCut(tok(3).Text, true))},
		{name: "stop text across tokens", edit: func(r *Request) { r.StopTexts = []string{across} },
			finish: FinishStop, stopBy: StopByText, wantText: new(textCut(across, false))},
		{name: "stop text across tokens, included", edit: func(r *Request) { r.StopTexts, r.IncludeStopInOutput = []string{across}, true },
			finish: FinishStop, stopBy: StopByText, wantText: new(textCut(across, true))},
		{name: "stop text at start", edit: func(r *Request) { r.StopTexts = []string{tok(0).Text} },
			finish: FinishStop, stopBy: StopByText, wantText: new(""), wantIDs: []uint32{}},
		{name: "earliest of two stop texts", edit: func(r *Request) { r.StopTexts = []string{tok(5).Text, tok(2).Text} },
			finish: FinishStop, stopBy: StopByText, wantText: new(b.text[:min(strings.Index(b.text, tok(5).Text), strings.Index(b.text, tok(2).Text))])},
		{name: "stop texts never complete", edit: func(r *Request) { r.StopTexts = []string{"zzz", b.text + "!?"} },
			finish: FinishStop, stopBy: StopByEOS, wantText: &b.text, wantIDs: ids(b.tokens)},
		{name: "stop text suppressed by min tokens", edit: func(r *Request) { r.StopTexts, r.MinTokens = []string{tok(0).Text}, 1 },
			check: func(t *testing.T, a answer) {
				if len(a.tokens) == 0 || a.tokens[0] != tok(0) || !strings.HasPrefix(b.text, a.text) {
					t.Errorf("got %q, want a prefix of the baseline starting with %q", a.text, tok(0).Text)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := base
			tt.edit(&req)
			a := generate(t, New(Config{}), req)
			if tt.finish != FinishUnspecified && (a.res.Finish != tt.finish || a.res.StopBy != tt.stopBy) {
				t.Errorf("finish %v by %v, want %v by %v", a.res.Finish, a.res.StopBy, tt.finish, tt.stopBy)
			}
			if tt.wantText != nil && a.text != *tt.wantText {
				t.Errorf("text %q, want %q", a.text, *tt.wantText)
			}
			if tt.wantIDs != nil && !slices.Equal(ids(a.tokens), tt.wantIDs) {
				t.Errorf("ids %v, want %v", ids(a.tokens), tt.wantIDs)
			}
			if a.res.StopBy == StopByText && !slices.Contains(req.StopTexts, a.res.StopMatch) {
				t.Errorf("StopMatch %q is not one of %q", a.res.StopMatch, req.StopTexts)
			}
			if a.res.StopBy == StopByTokenID && !slices.Contains(req.StopTokenIDs, a.res.StopTokenID) {
				t.Errorf("StopTokenID %d is not one of %v", a.res.StopTokenID, req.StopTokenIDs)
			}
			if int(a.res.CompletionTokens) != len(a.tokens) || a.res.PromptTokens != b.res.PromptTokens {
				t.Errorf("usage %d+%d, want %d+%d (completion = emitted tokens)", a.res.PromptTokens, a.res.CompletionTokens, b.res.PromptTokens, len(a.tokens))
			}
			for i, tk := range a.tokens { // only the last token may be cut by a stop text
				if full := TokenText(tk.ID); tk.Text != full && (i != len(a.tokens)-1 || !strings.HasPrefix(full, tk.Text) || tk.Text == "") {
					t.Errorf("token %d = %+v, want text %q", i, tk, full)
				}
			}
			if tt.check != nil {
				tt.check(t, a)
			}
		})
	}
}

// TestDecodeCancellation: a cancelled ctx ends decode before the next token
// with ctx.Err() and FinishCancelled.
func TestDecodeCancellation(t *testing.T) {
	for _, after := range []int{0, 1, 5} {
		t.Run(fmt.Sprintf("after %d tokens", after), func(t *testing.T) {
			m := New(Config{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if after == 0 {
				cancel()
			}
			emitted := 0
			res, err := m.Generate(ctx, Request{Prompt: "Go on.", IgnoreEOS: true, MaxTokens: 1000}, func(Token) error {
				emitted++
				if emitted == after {
					cancel()
				}
				return nil
			})
			if !errors.Is(err, context.Canceled) || res.Finish != FinishCancelled || emitted != after || int(res.CompletionTokens) != after {
				t.Errorf("Generate = %+v, %v after %d emitted; want context.Canceled, FinishCancelled, %d tokens", res, err, emitted, after)
			}
		})
	}
}

func TestEmitErrorIsReturned(t *testing.T) {
	boom := errors.New("client went away")
	calls := 0
	res, err := New(Config{}).Generate(context.Background(), Request{Prompt: "x", IgnoreEOS: true}, func(Token) error {
		calls++
		if calls == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls != 3 || res.CompletionTokens != 2 {
		t.Errorf("Generate = %+v, %v after %d calls; want the emit error after 3 calls, 2 tokens counted", res, err, calls)
	}
}

// TestContextWindowEndsWithLength: generation stops with FinishLength when
// prompt + generated tokens reach Config.MaxContextTokens.
func TestContextWindowEndsWithLength(t *testing.T) {
	req := Request{Prompt: "Go on.", IgnoreEOS: true, MaxTokens: 100}
	prompt := uint32(len(Tokenize(req.Prompt)))
	a := generate(t, New(Config{MaxContextTokens: int(prompt) + 3}), req)
	if a.res.Finish != FinishLength || len(a.tokens) != 3 {
		t.Errorf("got %d tokens, %v; want 3 tokens (context - prompt), FinishLength", len(a.tokens), a.res.Finish)
	}
}

// TestOutputHoldBack: text that may begin a stop text is emitted only once it
// cannot, and a match cuts the token it starts in.
func TestOutputHoldBack(t *testing.T) {
	id := func(s string) uint32 { return tokenIDs[s] }
	tests := []struct {
		name      string
		stops     []string
		include   bool
		push      []string
		emitted   []int  // tokens emitted so far after each push
		wantMatch string // after the last push
		wantText  string // all emitted text
	}{
		{name: "no stops", push: []string{" cat", " dog"}, emitted: []int{1, 2}, wantText: " cat dog"},
		{name: "held then released", stops: []string{"cat dog"}, push: []string{" cat", " the", " dog"},
			emitted: []int{0, 2, 3}, wantText: " cat the dog"},
		{name: "held then matched", stops: []string{"cat dog"}, push: []string{" cat", " dog"},
			emitted: []int{0, 1}, wantMatch: "cat dog", wantText: " "},
		{name: "held then matched, included", stops: []string{"cat dog"}, include: true, push: []string{" cat", " dog", " red"},
			emitted: []int{0, 2}, wantMatch: "cat dog", wantText: " cat dog"},
		{name: "match over three tokens", stops: []string{"t the d"}, push: []string{" cat", " the", " dog"},
			emitted: []int{0, 0, 1}, wantMatch: "t the d", wantText: " ca"},
		{name: "earliest start wins", stops: []string{"dog", "e dog"}, push: []string{" the", " dog"},
			emitted: []int{0, 1}, wantMatch: "e dog", wantText: " th"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []Token
			o := newOutput(Request{StopTexts: tt.stops, IncludeStopInOutput: tt.include}, func(tk Token) error {
				got = append(got, tk)
				return nil
			})
			var match string
			for i, s := range tt.push {
				var err error
				if match, err = o.push(id(s), true); err != nil {
					t.Fatal(err)
				}
				if len(got) != tt.emitted[i] {
					t.Errorf("after push %d (%q): %d tokens emitted, want %d", i, s, len(got), tt.emitted[i])
				}
				if match != "" {
					break
				}
			}
			if match == "" {
				o.flush()
			}
			var text string
			for _, tk := range got {
				text += tk.Text
			}
			if match != tt.wantMatch || text != tt.wantText {
				t.Errorf("match %q, text %q; want %q, %q", match, text, tt.wantMatch, tt.wantText)
			}
		})
	}
}
