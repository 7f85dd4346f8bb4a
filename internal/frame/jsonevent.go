// The event fields: what a JSON watch frame says (type, resourceVersion,
// initial-events-end, an ERROR's Status), decided per value by its key and its
// container's role as the lexer reads it, with encoding/json's decoding rules.

package frame

import (
	"bytes"
	"errors"
)

// Reasons a syntactically valid JSON frame is not a watch event client-go
// would decode.
var (
	errTypeNotString    = errors.New(`"type" is not a string`)
	errEnvelopeTypeMeta = errors.New("watch event has its own apiVersion or kind")
	errNoObject         = errors.New(`watch event has no "object"`)
	errObjectNotObject  = errors.New(`"object" is not a JSON object`)
	errObjectTypeMeta   = errors.New("object has no valid apiVersion and kind")
	errMetadata         = errors.New("object.metadata is malformed")
	errAnnotations      = errors.New("object.metadata.annotations is not a map of strings")
	errStatusFields     = errors.New("ERROR object's code, reason or details is malformed")
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

// role of the container at the top of the stack.
func (j *jsonScanner) role() uint8 {
	top := j.stack[len(j.stack)-1]
	if top&stackArray != 0 {
		return roleOther
	}
	return top
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
// An apiVersion is a few bytes: a loop over them costs less than a call.
func hasVersion(apiVersion []byte) bool {
	slash := -1
	for i, c := range apiVersion {
		if c == '/' {
			if slash >= 0 {
				return false
			}
			slash = i
		}
	}
	return len(apiVersion) > slash+1
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
	ev.setResumePoint(content(b, f.rv, &j.rvBuf), f.eventsEnd)
	return nil
}
