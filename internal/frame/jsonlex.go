// The JSON lexer: a resumable, validating parser that finds where one watch
// frame ends, following encoding/json's grammar. What the values mean for a
// watch resume is jsonevent.go's business; framing the stream is jsonframe.go's.

package frame

import "errors"

// maxNestingDepth is encoding/json's limit (also sigs.k8s.io/json's):
// deeper values are a syntax error.
const maxNestingDepth = 10000

// Syntax errors. They are static so that rejecting a frame (which ends the
// stream) does not have to build messages.
var (
	errNotObject       = errors.New("watch event is not a JSON object")
	errControlInString = errors.New("control character in string")
	errBadEscape       = errors.New("invalid escape in string")
	errSyntax          = errors.New("invalid JSON syntax")
	errTooDeep         = errors.New("JSON nested too deeply")
)

// Parser states between tokens.
const (
	stBeforeFrame  uint8 = iota // whitespace, then the frame's '{'
	stValue                     // a value
	stValueOrClose              // after '[': a value or ']'
	stKeyOrClose                // after '{': a key or '}'
	stKey                       // after ',' in an object: a key
	stColon                     // after a key: ':'
	stAfterValue                // ',' or the container's closer
	stString                    // inside a string (key or value)
)

// stackArray marks an array on the container stack; the other bits are the
// container's role.
const stackArray = 0x80

// span is a string's content within the frame: frame-relative offsets, and
// its strEscaped flag.
type span struct {
	start, end int
	flags      uint8
}

// jsonScanner is a resumable, validating JSON parser for one frame. It finds
// where the frame ends and, on the way, the few fields a watch resume needs.
// All positions are relative to the start of the frame (its separators
// included), so the Scanner may move or grow its buffer between calls.
type jsonScanner struct {
	state    uint8
	pos      int // next byte to look at
	valStart int // the frame's '{'
	stack    []uint8
	slot     uint8 // slot of the value about to start, or of the string being read
	isKey    bool  // the string being read is a key
	str      span  // the string being read
	facts    jsonFacts
	scratch  []byte // unquoted keys and values, reused
	rvBuf    []byte // unquoted resourceVersion, reused
}

func (j *jsonScanner) reset() {
	stack, scratch, rvBuf := j.stack[:0], j.scratch[:0], j.rvBuf[:0]
	*j = jsonScanner{stack: stack, scratch: scratch, rvBuf: rvBuf}
}

// scan outcomes
const (
	scanNeedMore = iota
	scanDone
	scanInvalid
)

// scan continues parsing the frame in b (which grows between calls, always
// starting at the frame's first separator byte). It returns scanDone with
// j.pos at the end of the frame, scanNeedMore when b ends first, or
// scanInvalid with the reason.
func (j *jsonScanner) scan(b []byte) (int, error) {
	i := j.pos
	if j.state == stString {
		n, status, err := j.readString(b, i)
		if status != scanDone {
			return status, err
		}
		i = n
	}
	for i < len(b) {
		c := b[i]
		if c <= ' ' && (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
			i++
			continue
		}
		switch j.state {
		case stBeforeFrame:
			if c != '{' {
				return scanInvalid, errNotObject
			}
			j.valStart = i
			j.stack = append(j.stack[:0], roleEnvelope)
			j.state = stKeyOrClose
			i++
		case stKeyOrClose, stKey:
			switch {
			case c == '"':
				j.startString(i, true)
				n, status, err := j.readString(b, i+1)
				if status != scanDone {
					return status, err
				}
				i = n
			case c == '}' && j.state == stKeyOrClose:
				i++
				if j.closeContainer() {
					j.pos = i
					return scanDone, nil
				}
			default:
				return scanInvalid, errSyntax
			}
		case stColon:
			if c != ':' {
				return scanInvalid, errSyntax
			}
			j.state = stValue
			i++
		case stAfterValue:
			top := j.stack[len(j.stack)-1]
			switch {
			case c == ',':
				if top&stackArray != 0 {
					j.slot = slotNone
					j.state = stValue
				} else {
					j.state = stKey
				}
				i++
			case c == '}' && top&stackArray == 0, c == ']' && top&stackArray != 0:
				i++
				if j.closeContainer() {
					j.pos = i
					return scanDone, nil
				}
			default:
				return scanInvalid, errSyntax
			}
		case stValue, stValueOrClose:
			switch {
			case c == '"':
				j.startString(i, false)
				n, status, err := j.readString(b, i+1)
				if status != scanDone {
					return status, err
				}
				i = n
			case c == ']' && j.state == stValueOrClose:
				i++
				j.closeContainer() // an array is never the frame itself
			default:
				n, status, err := j.value(b, i)
				if status != scanDone {
					j.pos = i
					return status, err
				}
				i = n
			}
		}
	}
	j.pos = i
	return scanNeedMore, nil
}

// readString reads the rest of the string started by startString, from b[i],
// and returns the position after its closing quote. If b ends first, it
// records where to resume and returns scanNeedMore.
func (j *jsonScanner) readString(b []byte, i int) (int, int, error) {
	end, resume, err := scanStringBody(b, i, &j.str.flags)
	if err != nil {
		return 0, scanInvalid, err
	}
	if end < 0 {
		j.pos = resume
		return 0, scanNeedMore, nil
	}
	j.str.end = end
	if j.isKey {
		j.slot = j.keySlot(b)
		j.state = stColon
	} else {
		j.stringValue(b)
		j.state = stAfterValue
	}
	return end + 1, scanDone, nil
}

// value starts or reads the value at b[i], which is not a string. Containers
// only start here; numbers and literals are read whole (scanNeedMore, to be read again
// from i, if b ends inside one). It returns the position after what it read.
func (j *jsonScanner) value(b []byte, i int) (int, int, error) {
	switch c := b[i]; c {
	case '{', '[':
		if len(j.stack) >= maxNestingDepth {
			return 0, scanInvalid, errTooDeep
		}
		role := j.containerValue(c == '[')
		if c == '[' {
			j.stack = append(j.stack, stackArray)
			j.slot = slotNone
			j.state = stValueOrClose
		} else {
			j.stack = append(j.stack, role)
			j.state = stKeyOrClose
		}
		return i + 1, scanDone, nil
	case 't', 'f', 'n':
		lit := "null"
		switch c {
		case 't':
			lit = "true"
		case 'f':
			lit = "false"
		}
		n := min(len(lit), len(b)-i)
		if string(b[i:i+n]) != lit[:n] {
			return 0, scanInvalid, errSyntax
		}
		if n < len(lit) {
			return 0, scanNeedMore, nil
		}
		if c == 'n' {
			j.nullValue()
		} else {
			j.wrongType()
		}
		j.state = stAfterValue
		return i + n, scanDone, nil
	default:
		end, status := scanNumber(b, i)
		switch status {
		case scanNeedMore:
			return 0, scanNeedMore, nil
		case scanInvalid:
			return 0, scanInvalid, errSyntax
		}
		j.numberValue(b[i:end])
		j.state = stAfterValue
		return end, scanDone, nil
	}
}

func (j *jsonScanner) startString(i int, isKey bool) {
	j.state = stString
	j.isKey = isKey
	j.str = span{start: i + 1}
}

// closeContainer pops the innermost container and reports whether it was the
// frame itself (the state is then never looked at again).
func (j *jsonScanner) closeContainer() bool {
	j.stack = j.stack[:len(j.stack)-1]
	j.state = stAfterValue
	return len(j.stack) == 0
}

// scanNumber reads a JSON number starting at b[i] (a '-' or a digit, or
// something else, which is a syntax error), following encoding/json's grammar
// so that a malformed number is an error as soon as it is seen.
func scanNumber(b []byte, i int) (int, int) {
	const (
		start = iota
		minus
		zero
		integer
		dot
		fraction
		exp
		expSign
		expDigits
	)
	state := start
	for ; i < len(b); i++ {
		c := b[i]
		digit := '0' <= c && c <= '9'
		switch state {
		case start:
			switch {
			case c == '-':
				state = minus
			case c == '0':
				state = zero
			case digit:
				state = integer
			default:
				return 0, scanInvalid
			}
			continue
		case minus:
			switch {
			case c == '0':
				state = zero
			case digit:
				state = integer
			default:
				return 0, scanInvalid
			}
			continue
		case integer:
			if digit {
				continue
			}
			fallthrough
		case zero:
			switch c {
			case '.':
				state = dot
				continue
			case 'e', 'E':
				state = exp
				continue
			}
			return i, scanDone
		case dot:
			if !digit {
				return 0, scanInvalid
			}
			state = fraction
			continue
		case fraction:
			if digit {
				continue
			}
			if c == 'e' || c == 'E' {
				state = exp
				continue
			}
			return i, scanDone
		case exp:
			if c == '+' || c == '-' {
				state = expSign
				continue
			}
			fallthrough
		case expSign:
			if !digit {
				return 0, scanInvalid
			}
			state = expDigits
			continue
		case expDigits:
			if digit {
				continue
			}
			return i, scanDone
		}
	}
	return 0, scanNeedMore
}

// content returns a string's value, unquoting into buf only if it must.
func content(b []byte, s span, buf *[]byte) []byte {
	raw := b[s.start:s.end]
	if !needsUnquote(raw, s.flags) {
		return raw
	}
	*buf = appendUnquoted((*buf)[:0], raw)
	return *buf
}
