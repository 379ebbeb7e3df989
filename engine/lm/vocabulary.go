package lm

import "strings"

// Token ids with a fixed meaning. The layout of the vocabulary is:
//
//	0            EOSID (text "")
//	1            ImageID (text "<image>")
//	2..257       one token per byte value 0x00..0xff (text: that byte)
//	258..        the words of vocabularyWords, each as " word" and "word"
//	             (the bare form is skipped where it already exists, e.g. "a")
//
// The layout is part of the model: changing it changes every answer.
const (
	// EOSID ends an answer (FinishStop) unless IgnoreEOS or MinTokens
	// suppresses it. Its text is "" and it is never emitted as a token unless
	// listed in StopTokenIDs with IncludeStopInOutput.
	EOSID uint32 = 0
	// ImageID is the token of the literal "<image>" image marker.
	ImageID uint32 = 1
	// ImageMarker is the prompt text that marks one image's position.
	ImageMarker = "<image>"

	firstByteID uint32 = 2
)

// vocabularyWords are the word tokens. Generated answers are made of these
// (with a leading space) and a few punctuation bytes, so they are valid UTF-8.
var vocabularyWords = strings.Fields(`
the a an of and or to in on at by for with from into over under near behind
above below between beside inside outside this that these those it its there
here is are was were be been has have had do does did can could will would may
might should must not no yes very more most some many few all each every both
image picture photo scene view frame shows show showing depicts contains see
seen looks look appears appear left right top bottom center middle front back
background foreground corner edge side large small big tiny tall short long wide
narrow round square flat bright dark light shadow color colour red green blue
yellow orange purple pink brown black white gray grey gold silver striped dotted
cat dog bird horse cow sheep fish duck bear lion tiger zebra giraffe elephant
person man woman child boy girl people group crowd face hand eye hair hat shirt
car bus truck bike boat train plane road street bridge building house tower wall
door window roof fence tree trees grass flower flowers leaf field forest river
lake sea ocean beach sand rock mountain hill sky cloud clouds sun moon star snow
rain water fire table chair bed sofa lamp cup plate bowl bottle book phone clock
ball box bag sign text letter number line circle triangle pattern shape object
objects thing things one two three four five several pair standing sitting lying
walking running flying holding wearing playing eating looking close far old new
young happy calm quiet busy empty full open closed clear soft hard warm cold wet
dry smooth rough sharp blurry detailed simple plain noisy pixel pixels texture
`)

// outputPunctuation are the byte tokens, besides words, that answers may contain.
const outputPunctuation = ".,!?"

var (
	tokenTexts  []string          // id -> text
	tokenIDs    map[string]uint32 // text -> id, for greedy longest match
	maxTokenLen int               // longest text in tokenIDs, bytes
	outputIDs   []uint32          // candidate ids of a decode step (no EOS)
)

func init() {
	tokenIDs = map[string]uint32{}
	add := func(text string) uint32 {
		if id, ok := tokenIDs[text]; ok {
			return id
		}
		id := uint32(len(tokenTexts))
		tokenTexts = append(tokenTexts, text)
		if text != "" {
			tokenIDs[text] = id
			maxTokenLen = max(maxTokenLen, len(text))
		}
		return id
	}
	add("")          // EOSID
	add(ImageMarker) // ImageID
	for b := 0; b < 256; b++ {
		add(string([]byte{byte(b)}))
	}
	for _, p := range []byte(outputPunctuation) {
		outputIDs = append(outputIDs, firstByteID+uint32(p))
	}
	for _, w := range vocabularyWords {
		outputIDs = append(outputIDs, add(" "+w))
		add(w)
	}
}

// VocabSize is the number of token ids: valid ids are 0..VocabSize()-1
// (a few hundred; see the layout at EOSID).
func VocabSize() int { return len(tokenTexts) }

// TokenText returns the text of one token id; "" for EOSID and for ids out of
// range. Byte tokens 0x80..0xff are single bytes that are not valid UTF-8 on
// their own; they occur only in tokenized prompts, never in generated answers.
func TokenText(id uint32) string {
	if int64(id) >= int64(len(tokenTexts)) {
		return ""
	}
	return tokenTexts[id]
}

// Tokenize splits prompt text into token ids by greedy longest match over the
// vocabulary, falling back to one token per byte; the literal "<image>" becomes
// ImageID. It never fails, and Detokenize(Tokenize(s)) == s for every s.
func Tokenize(prompt string) []uint32 {
	ids := make([]uint32, 0, len(prompt)/3+1)
	for i := 0; i < len(prompt); {
		n := min(maxTokenLen, len(prompt)-i)
		for ; n > 1; n-- {
			if id, ok := tokenIDs[prompt[i:i+n]]; ok {
				ids = append(ids, id)
				break
			}
		}
		if n == 1 { // byte fallback always matches
			ids = append(ids, firstByteID+uint32(prompt[i]))
		}
		i += n
	}
	return ids
}

// Detokenize concatenates the texts of ids (see TokenText; out-of-range ids
// contribute "").
func Detokenize(ids []uint32) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(TokenText(id))
	}
	return b.String()
}
