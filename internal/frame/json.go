package frame

import (
	"bytes"
	"errors"
	"fmt"
)

// maxNestingDepth is encoding/json's limit (also sigs.k8s.io/json's):
// deeper values are a syntax error.
const maxNestingDepth = 10000

// Reasons a JSON frame is invalid. They are static so that rejecting a frame
// (which ends the stream) does not have to build messages.
var (
	errNotObject        = errors.New("watch event is not a JSON object")
	errControlInString  = errors.New("control character in string")
	errBadEscape        = errors.New("invalid escape in string")
	errSyntax           = errors.New("invalid JSON syntax")
	errTooDeep          = errors.New("JSON nested too deeply")
	errTypeNotString    = errors.New(`"type" is not a string`)
	errEnvelopeTypeMeta = errors.New("watch event has its own apiVersion or kind")
	errNoObject         = errors.New(`watch event has no "object"`)
	errObjectNotObject  = errors.New(`"object" is not a JSON object`)
	errObjectTypeMeta   = errors.New("object has no valid apiVersion and kind")
	errMetadata         = errors.New("object.metadata is malformed")
	errAnnotations      = errors.New("object.metadata.annotations is not a map of strings")
	errNoRV             = errors.New("object has no metadata.resourceVersion")
	errStatusFields     = errors.New("ERROR object's code, reason or details is malformed")
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

// Roles of the containers whose keys matter; every other one is roleOther.
const (
	roleOther uint8 = iota
	roleEnvelope
	roleObject
	roleMetadata
	roleAnnotations
	roleDetails
)

// Slots: what a value is, decided by its key and its container's role.
const (
	slotNone          uint8 = iota // read by nobody: only checked for syntax
	slotType                       // envelope "type"
	slotObject                     // envelope "object"
	slotEnvKind                    // envelope "kind" (any case)
	slotEnvAPIVersion              // envelope "apiVersion" (any case)
	slotObjKind                    // object "kind" (any case)
	slotObjAPIVersion              // object "apiVersion" (any case)
	slotMetadata                   // object "metadata"
	slotRV                         // metadata "resourceVersion"
	slotAnnotations                // metadata "annotations"
	slotEventsEnd                  // annotations["k8s.io/initial-events-end"]
	slotAnnotation                 // any other annotation
	slotCode                       // object "code"
	slotReason                     // object "reason"
	slotDetails                    // object "details"
	slotRetryAfter                 // details "retryAfterSeconds"
)

// Type-error flags: a value of the wrong JSON type where a typed decode
// expects a string, number or object fails the whole decode.
const (
	badType        = 1 << iota // envelope "type" is not a string
	badEnvTypeMeta             // envelope apiVersion/kind is not a string
	badObjTypeMeta             // object apiVersion/kind is not a string
	badMetadata                // metadata or resourceVersion has the wrong type
	badAnnotations             // annotations is not a map of strings
	badStatus                  // code, reason, details, retryAfterSeconds
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

// jsonFacts is what a frame says so far. Like encoding/json decoding into a
// struct, the last occurrence of a key wins, null leaves a field as it was,
// and a repeated nested object is merged into the previous one; "object"
// itself is a runtime.RawExtension, which a later value replaces whole.
// A string field never seen is the zero span, whose content is empty: the
// same as an empty string, which is all the checks need to know.
type jsonFacts struct {
	typ            span
	envKind        bool // envelope kind is a non-empty string
	envAPIVersion  bool // envelope apiVersion is a non-empty string
	hasObject      bool // a non-null "object" was seen
	objectIsObject bool // ... and the last one is a JSON object
	objKind        bool // object kind is a non-empty string
	objAPIVersion  bool // object apiVersion parses with a non-empty version
	bad            uint8
	rv             span
	eventsEnd      bool
	code           int32
	reason         span
	retryAfter     int32
}

// resetObject forgets everything learned from a previous "object" value.
func (f *jsonFacts) resetObject() {
	*f = jsonFacts{
		typ:     f.typ,
		envKind: f.envKind, envAPIVersion: f.envAPIVersion,
		bad: f.bad & (badType | badEnvTypeMeta),
	}
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

// role of the container at the top of the stack.
func (j *jsonScanner) role() uint8 {
	top := j.stack[len(j.stack)-1]
	if top&stackArray != 0 {
		return roleOther
	}
	return top
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

// keySlot decides the slot of the value that follows the key just read.
func (j *jsonScanner) keySlot(b []byte) uint8 {
	role := j.role()
	if role == roleOther {
		return slotNone
	}
	// An unescaped key compares as it is: invalid UTF-8, which decoding
	// would turn into U+FFFD, matches none of the ASCII names either way.
	key := b[j.str.start:j.str.end]
	if j.str.flags&strEscaped != 0 {
		key = appendUnquoted(j.scratch[:0], key)
		j.scratch = key
	}
	// Field names are matched exactly (sigs.k8s.io/json), except apiVersion
	// and kind, which typeMetaSlot matches in any case.
	switch role {
	case roleEnvelope:
		switch string(key) {
		case "type":
			return slotType
		case "object":
			return slotObject
		}
		return typeMetaSlot(key, slotEnvKind, slotEnvAPIVersion)
	case roleObject:
		switch string(key) {
		case "metadata":
			return slotMetadata
		case "code":
			return slotCode
		case "reason":
			return slotReason
		case "details":
			return slotDetails
		}
		return typeMetaSlot(key, slotObjKind, slotObjAPIVersion)
	case roleMetadata:
		switch string(key) {
		case "resourceVersion":
			return slotRV
		case "annotations":
			return slotAnnotations
		}
	case roleAnnotations:
		if string(key) == "k8s.io/initial-events-end" {
			return slotEventsEnd
		}
		return slotAnnotation
	case roleDetails:
		if string(key) == "retryAfterSeconds" {
			return slotRetryAfter
		}
	}
	return slotNone
}

// typeMetaSlot returns kind or apiVersion for a key that is "kind" or
// "apiVersion" in any case, as the encoding/json pass that reads them matches
// it, and slotNone for any other key.
func typeMetaSlot(key []byte, kind, apiVersion uint8) uint8 {
	switch {
	case bytes.EqualFold(key, []byte("kind")):
		return kind
	case bytes.EqualFold(key, []byte("apiVersion")):
		return apiVersion
	}
	return slotNone
}

// badTypeFlag is the flag a value of the wrong JSON type sets in each slot.
var badTypeFlag = [...]uint8{
	slotType:          badType,
	slotEnvKind:       badEnvTypeMeta,
	slotEnvAPIVersion: badEnvTypeMeta,
	slotObjKind:       badObjTypeMeta,
	slotObjAPIVersion: badObjTypeMeta,
	slotMetadata:      badMetadata,
	slotRV:            badMetadata,
	slotAnnotations:   badAnnotations,
	slotEventsEnd:     badAnnotations,
	slotAnnotation:    badAnnotations,
	slotCode:          badStatus,
	slotReason:        badStatus,
	slotDetails:       badStatus,
	slotRetryAfter:    badStatus,
}

// wrongType records a value whose JSON type its slot cannot take (a bool, or
// a number, string, array or object where none fits).
func (j *jsonScanner) wrongType() {
	if j.slot == slotObject {
		// RawExtension takes any value; a non-object fails only later, when
		// the object is decoded.
		j.facts.resetObject()
		j.facts.hasObject = true
		return
	}
	j.facts.bad |= badTypeFlag[j.slot]
}

// containerValue handles an object or array value in the current slot and
// returns the role of the new container.
func (j *jsonScanner) containerValue(array bool) uint8 {
	f := &j.facts
	if array {
		j.wrongType()
		return roleOther
	}
	switch j.slot {
	case slotNone:
		return roleOther
	case slotObject:
		f.resetObject()
		f.hasObject, f.objectIsObject = true, true
		return roleObject
	case slotMetadata:
		return roleMetadata
	case slotAnnotations:
		return roleAnnotations
	case slotDetails:
		return roleDetails
	}
	j.wrongType()
	return roleOther
}

// nullValue handles null: a no-op for strings, numbers and structs, while it
// clears a map (annotations) or a pointer (details).
func (j *jsonScanner) nullValue() {
	switch j.slot {
	case slotAnnotations, slotEventsEnd:
		// A null map element is decoded as "" into the map.
		j.facts.eventsEnd = false
	case slotDetails:
		j.facts.retryAfter = 0
	}
}

// numberValue handles a number.
func (j *jsonScanner) numberValue(num []byte) {
	switch j.slot {
	case slotNone:
	case slotCode, slotRetryAfter:
		v, ok := parseInt32(num)
		if !ok {
			j.facts.bad |= badStatus
		} else if j.slot == slotCode {
			j.facts.code = v
		} else {
			j.facts.retryAfter = v
		}
	default:
		j.wrongType()
	}
}

// parseInt32 parses a JSON number the way encoding/json decodes it into an
// int32: an integer literal (no fraction, no exponent) within range. It is
// strconv.ParseInt(string(num), 10, 32) without the *NumError a refused
// number allocates: "code" is looked at in every event's object.
func parseInt32(num []byte) (int32, bool) {
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	var v int64
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
		if v > 1<<31 {
			return 0, false
		}
	}
	if neg {
		v = -v
	}
	if v < -1<<31 || v > 1<<31-1 {
		return 0, false
	}
	return int32(v), true
}

// stringValue handles the string value just read.
func (j *jsonScanner) stringValue(b []byte) {
	f := &j.facts
	s := j.str
	switch j.slot {
	case slotNone, slotAnnotation:
	case slotType:
		f.typ = s
	case slotEnvKind:
		f.envKind = s.end > s.start
	case slotEnvAPIVersion:
		f.envAPIVersion = s.end > s.start
	case slotObjKind:
		f.objKind = s.end > s.start
	case slotObjAPIVersion:
		f.objAPIVersion = hasVersion(content(b, s, &j.scratch))
	case slotRV:
		f.rv = s
	case slotEventsEnd:
		f.eventsEnd = string(content(b, s, &j.scratch)) == "true"
	case slotReason:
		f.reason = s
	default:
		j.wrongType()
	}
}

// hasVersion reports whether apiVersion parses (as schema.ParseGroupVersion
// does) to a non-empty version, which decoding the object requires.
func hasVersion(apiVersion []byte) bool {
	slash := bytes.IndexByte(apiVersion, '/')
	if slash < 0 {
		return len(apiVersion) > 0
	}
	version := apiVersion[slash+1:]
	return len(version) > 0 && bytes.IndexByte(version, '/') < 0
}

// event checks the facts of a whole frame b and fills ev.
func (j *jsonScanner) event(b []byte, ev *Event) error {
	f := &j.facts
	switch {
	case f.bad&badType != 0:
		return errTypeNotString
	case f.bad&badEnvTypeMeta != 0, f.envKind, f.envAPIVersion:
		// client-go would look the envelope's kind up in its scheme; the API
		// server never sends one, so refuse rather than guess.
		return errEnvelopeTypeMeta
	}
	typ := eventTypeOf(content(b, f.typ, &j.scratch))
	if typ == 0 {
		return &unknownTypeError{name: string(content(b, f.typ, &j.scratch))}
	}
	switch {
	case !f.hasObject:
		return errNoObject
	case !f.objectIsObject:
		return errObjectNotObject
	case f.bad&badObjTypeMeta != 0, !f.objKind, !f.objAPIVersion:
		return errObjectTypeMeta
	case f.bad&badMetadata != 0:
		return errMetadata
	}
	*ev = Event{Type: typ}
	if typ == Error {
		if f.bad&badStatus != 0 {
			return errStatusFields
		}
		ev.setStatus(f.code, content(b, f.reason, &j.scratch), f.retryAfter)
		return nil
	}
	if f.bad&badAnnotations != 0 {
		return errAnnotations
	}
	if f.rv.end == f.rv.start {
		return errNoRV
	}
	ev.setResumePoint(content(b, f.rv, &j.rvBuf), f.eventsEnd)
	return nil
}

// nextJSON is Next for JSON streams.
func (s *Scanner) nextJSON() (Frame, error) {
	j := &s.json
	j.reset()
	for {
		b := s.buf[s.start:s.end]
		status, err := j.scan(b)
		switch status {
		case scanInvalid:
			s.trailing = b[:leadingSpace(b)]
			return Frame{}, s.invalid(len(s.trailing), err)
		case scanDone:
			if j.pos-j.valStart > s.maxSize {
				s.trailing = b[:j.valStart]
				return Frame{}, s.fail(s.tooLarge(j.pos - j.valStart))
			}
			fr := Frame{Raw: b[:j.pos]}
			if err := j.event(fr.Raw, &fr.Event); err != nil {
				s.trailing = b[:j.valStart]
				return Frame{}, s.invalid(j.valStart, err)
			}
			s.returned = j.pos
			return fr, nil
		}
		// Need more. Refuse to buffer past the limit, counting a run of
		// separators on its own.
		if j.state == stBeforeFrame && j.pos > s.maxSize ||
			j.state != stBeforeFrame && len(b)-j.valStart > s.maxSize {
			s.trailing = b[:leadingSpace(b)]
			return Frame{}, s.fail(s.tooLarge(len(b) - j.valStart))
		}
		if !s.fill() {
			b = s.buf[s.start:s.end]
			s.trailing = b[:leadingSpace(b)]
			return Frame{}, s.endOfStream(len(s.trailing) < len(b))
		}
	}
}

// leadingSpace returns the length of b's leading JSON whitespace.
func leadingSpace(b []byte) int {
	for i, c := range b {
		if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			return i
		}
	}
	return len(b)
}

func (s *Scanner) tooLarge(size int) error {
	return fmt.Errorf("frame: %s frame at offset %d is more than %d bytes (%d so far): %w",
		s.encoding, s.offset, s.maxSize, size, ErrFrameTooLarge)
}
