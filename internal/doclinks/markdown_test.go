package doclinks

import (
	"html"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// A link is one link or image destination found in a Markdown file.
type link struct {
	line   int    // 1-based line of the destination
	target string // as written, without its title
}

// A document is what the check needs of one Markdown file: the links it makes
// and the anchors it offers.
type document struct {
	links   []link
	anchors map[string]bool
}

var (
	fenceOpen     = regexp.MustCompile("^\\s*(`{3,}|~{3,})")
	atxHeading    = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$`)
	atxClosing    = regexp.MustCompile(`(?:^|[ \t]+)#+$`)
	setextLine    = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	referenceDef  = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:[ \t]*(<[^>]*>|\S+)`)
	htmlLinkAttr  = regexp.MustCompile(`(?i)<(?:a|img)\b[^>]*?\s(?:href|src)\s*=\s*"([^"]*)"`)
	htmlAnchorTag = regexp.MustCompile(`(?i)<[a-z][^>]*?\s(?:id|name)\s*=\s*"([^"]+)"`)
	htmlTag       = regexp.MustCompile(`</?[A-Za-z][^>]*>`)
	orderedItem   = regexp.MustCompile(`^\d+[.)] `)
)

// parse reads a Markdown document: fenced code is skipped, code spans are
// blanked before links are looked for, and every heading yields GitHub's anchor.
func parse(src string) document {
	doc := document{anchors: map[string]bool{}}
	used := map[string]int{} // anchor -> how many headings produced it so far
	addHeading := func(text string) {
		slug := headingAnchor(text)
		if n := used[slug]; n > 0 {
			used[slug] = n + 1
			slug += "-" + strconv.Itoa(n)
		} else {
			used[slug] = 1
		}
		doc.anchors[slug] = true
	}

	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
	var paragraph []string // the lines of the current paragraph
	paragraphStart := 0    // 0-based index of its first line
	flush := func() {
		if len(paragraph) > 0 {
			doc.links = append(doc.links, paragraphLinks(paragraph, paragraphStart)...)
		}
		paragraph = nil
	}

	fence := "" // the opening fence while inside fenced code
	for i, line := range lines {
		if fence != "" {
			if m := fenceOpen.FindStringSubmatch(line); m != nil && m[1][0] == fence[0] && len(m[1]) >= len(fence) &&
				strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), m[1][:1])) == "" {
				fence = ""
			}
			continue
		}
		if m := fenceOpen.FindStringSubmatch(line); m != nil && !(m[1][0] == '`' && strings.Contains(line[len(m[0]):], "`")) {
			flush()
			fence = m[1]
			continue
		}
		for _, m := range htmlAnchorTag.FindAllStringSubmatch(line, -1) {
			doc.anchors[m[1]] = true
		}
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		if m := atxHeading.FindStringSubmatch(line); m != nil {
			flush()
			addHeading(atxClosing.ReplaceAllString(m[2], ""))
			doc.links = append(doc.links, paragraphLinks([]string{line}, i)...)
			continue
		}
		if setextLine.MatchString(line) && len(paragraph) > 0 && isPlainText(paragraph) {
			addHeading(strings.Join(paragraph, " "))
			flush()
			continue
		}
		if len(paragraph) == 0 {
			paragraphStart = i
		}
		paragraph = append(paragraph, line)
	}
	flush()
	return doc
}

// isPlainText reports whether a paragraph may be the text of a setext heading:
// not a table, list, quote or reference definition, whose next line of dashes
// is something else.
func isPlainText(paragraph []string) bool {
	first := strings.TrimSpace(paragraph[0])
	for _, prefix := range []string{"|", "- ", "* ", "+ ", ">", "["} {
		if strings.HasPrefix(first, prefix) {
			return false
		}
	}
	return !orderedItem.MatchString(first)
}

// paragraphLinks finds the link destinations of one paragraph whose first line
// is line index start. Code spans may run across the paragraph's lines.
func paragraphLinks(paragraph []string, start int) []link {
	text := blankCodeSpans(strings.Join(paragraph, "\n"))
	lineAt := func(offset int) int { return start + 1 + strings.Count(text[:offset], "\n") }

	var links []link
	for offset := 0; ; {
		i := strings.Index(text[offset:], "](")
		if i < 0 {
			break
		}
		closeBracket := offset + i
		destStart := closeBracket + 2
		offset = destStart
		if !opensLink(text[:closeBracket]) {
			continue
		}
		if target, ok := inlineDestination(text[destStart:]); ok && target != "" {
			links = append(links, link{line: lineAt(destStart), target: target})
		}
	}
	for _, m := range htmlLinkAttr.FindAllStringSubmatchIndex(text, -1) {
		links = append(links, link{line: lineAt(m[2]), target: html.UnescapeString(text[m[2]:m[3]])})
	}
	for i, line := range strings.Split(text, "\n") {
		if m := referenceDef.FindStringSubmatch(line); m != nil {
			links = append(links, link{line: start + 1 + i, target: strings.Trim(m[1], "<>")})
		}
	}
	return links
}

// opensLink reports whether the text before a "](" holds the "[" that opens
// its link text: brackets balance, and neither it nor the "]" is escaped.
func opensLink(before string) bool {
	escaped := func(i int) bool { return i > 0 && before[i-1] == '\\' }
	if escaped(len(before)) {
		return false
	}
	depth := 0
	for i := len(before) - 1; i >= 0; i-- {
		switch {
		case escaped(i):
		case before[i] == ']':
			depth++
		case before[i] == '[' && depth > 0:
			depth--
		case before[i] == '[':
			return true
		}
	}
	return false
}

// inlineDestination reads the destination of an inline link from just after
// its "](": <...>, or up to white space or the ")" that balances the ones
// before it. ok is false when what follows is not a destination at all.
func inlineDestination(s string) (target string, ok bool) {
	s = strings.TrimLeft(s, " \t\n")
	if strings.HasPrefix(s, "<") {
		end := strings.IndexByte(s, '>')
		if end < 0 {
			return "", false
		}
		return s[1:end], true
	}
	depth := 0
	for i, r := range s {
		switch {
		case r == '\\':
			continue
		case r == '(':
			depth++
		case r == ')' && depth == 0:
			return s[:i], true
		case r == ')':
			depth--
		case unicode.IsSpace(r):
			return s[:i], true
		}
	}
	return "", false
}

// blankCodeSpans replaces every code span (a run of n backticks up to the next
// run of exactly n) with spaces, keeping line breaks, so that offsets still
// match and nothing inside one is taken for a link. An unmatched run is text.
func blankCodeSpans(text string) string {
	out := []byte(text)
	for i := 0; i < len(text); {
		if text[i] != '`' {
			i++
			continue
		}
		n := runLength(text, i)
		end := -1
		for j := i + n; j < len(text); {
			if text[j] != '`' {
				j++
				continue
			}
			m := runLength(text, j)
			if m == n {
				end = j + m
				break
			}
			j += m
		}
		if end < 0 {
			i += n
			continue
		}
		for k := i; k < end; k++ {
			if out[k] != '\n' {
				out[k] = ' '
			}
		}
		i = end
	}
	return string(out)
}

func runLength(text string, i int) int {
	n := 0
	for i+n < len(text) && text[i+n] == text[i] {
		n++
	}
	return n
}

// headingAnchor is the anchor GitHub gives a heading: the heading's rendered
// text, lower-cased, with every character but letters, marks, numbers,
// connector punctuation ("_"), "-" and " " removed, and each space a "-".
func headingAnchor(heading string) string {
	text := strings.ToLower(strings.TrimSpace(renderedText(heading)))
	var b strings.Builder
	for _, r := range text {
		switch {
		case unicode.IsLetter(r), unicode.IsMark(r), unicode.IsNumber(r), unicode.Is(unicode.Pc, r), r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

var (
	inlineLink     = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	referenceLink  = regexp.MustCompile(`!?\[([^\]]*)\]\[[^\]]*\]`)
	backslashPunct = regexp.MustCompile(`\\([[:punct:]])`)
)

// renderedText is the text a heading shows: code spans keep their content
// literally; elsewhere links and images become their text, HTML tags go,
// entities and backslash escapes are resolved and emphasis underscores dropped.
func renderedText(heading string) string {
	var b strings.Builder
	for i := 0; i < len(heading); {
		if heading[i] != '`' {
			next := strings.IndexByte(heading[i:], '`')
			if next < 0 {
				next = len(heading) - i
			}
			b.WriteString(renderInline(heading[i : i+next]))
			i += next
			continue
		}
		n := runLength(heading, i)
		closing := strings.Index(heading[i+n:], heading[i:i+n])
		if closing < 0 || runLength(heading, i+n+closing) != n {
			b.WriteString(heading[i : i+n])
			i += n
			continue
		}
		b.WriteString(strings.TrimSpace(heading[i+n : i+n+closing]))
		i += n + closing + n
	}
	return b.String()
}

func renderInline(s string) string {
	s = inlineLink.ReplaceAllString(s, "$1")
	s = referenceLink.ReplaceAllString(s, "$1")
	s = htmlTag.ReplaceAllString(s, "")
	s = dropEmphasisUnderscores(s)
	s = backslashPunct.ReplaceAllString(s, "$1")
	return html.UnescapeString(s)
}

// dropEmphasisUnderscores removes runs of "_" that open or close emphasis
// (at the edge of a word), and keeps those inside a word (snake_case).
func dropEmphasisUnderscores(s string) string {
	runes := []rune(s)
	word := func(i int) bool {
		return i >= 0 && i < len(runes) && (unicode.IsLetter(runes[i]) || unicode.IsNumber(runes[i]))
	}
	var b strings.Builder
	for i := 0; i < len(runes); {
		if runes[i] != '_' || (i > 0 && runes[i-1] == '\\') {
			b.WriteRune(runes[i])
			i++
			continue
		}
		j := i
		for j < len(runes) && runes[j] == '_' {
			j++
		}
		if word(i-1) && word(j) {
			b.WriteString(string(runes[i:j]))
		}
		i = j
	}
	return b.String()
}
