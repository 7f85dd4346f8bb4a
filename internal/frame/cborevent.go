// The event fields of a whole CBOR watch frame: type, resourceVersion,
// initial-events-end and an ERROR's Status, read in place. The reading
// follows the typed decode client-go does (apimachinery's CBOR serializer, in
// its lax decode mode, into metav1.WatchEvent and then into the object's
// type) for the shapes kube-apiserver writes; anything else is handed to that
// very decoder (cbordecode.go), which allocates but is exact.

package frame

import (
	"bytes"
	"slices"
	"unicode/utf8"
)

// cborSpan is the content of a string in a frame: b[start:end].
type cborSpan struct{ start, end int }

// cborFields reads the fields of a whole frame. keys holds the keys of the
// maps being read, for duplicate detection (a duplicate key makes the typed
// decode fail), and sorted is scratch for large maps.
type cborFields struct {
	keys   []cborSpan
	sorted []cborSpan
	rvBuf  []byte // the resourceVersion the decoder found, for the slow path
}

// event fills ev from the whole, well-formed frame b.
func (f *cborFields) event(b []byte, ev *Event) error {
	if f.fastEvent(b, ev) {
		return nil
	}
	return decodeCBOREvent(b, ev, &f.rvBuf)
}

// The keys a watch event's maps are read by (struct field names, matched
// exactly as apimachinery's CBOR decode mode does).
const (
	keyType              = "type"
	keyObject            = "object"
	keyKind              = "kind"
	keyAPIVersion        = "apiVersion"
	keyMetadata          = "metadata"
	keyResourceVersion   = "resourceVersion"
	keyAnnotations       = "annotations"
	keyCode              = "code"
	keyReason            = "reason"
	keyDetails           = "details"
	keyRetryAfterSeconds = "retryAfterSeconds"
	keyInitialEventsEnd  = "k8s.io/initial-events-end"
)

// cborEventFields is what the fast path read from a frame. The object is
// read in one pass for both kinds of event, before the type is known: the
// fields only an ERROR's Status decodes (code, reason, details) and those
// only other objects decode (annotations) record whether they would decode,
// and only the ones of the event's kind count.
type cborEventFields struct {
	typ        cborSpan
	object     bool
	kind       bool
	apiVersion bool
	rv         cborSpan
	// Non-ERROR events.
	eventsEnd     bool
	annotationsOK bool
	// ERROR events.
	code       int32
	reason     cborSpan
	retryAfter int32
	statusOK   bool
}

// fastEvent reads the frame in place. It reports false, leaving ev alone,
// for anything outside the shapes it knows to read exactly as the typed
// decode does: tags other than the self-described one, indefinite-length
// strings, non-string keys or values where the decode wants strings,
// duplicate keys, and every frame the decode refuses.
func (f *cborFields) fastEvent(b []byte, ev *Event) bool {
	fields := cborEventFields{annotationsOK: true, statusOK: true}
	_, ok := f.eachPair(b, 0, func(key cborSpan, i int) (int, bool) {
		var ok bool
		switch string(b[key.start:key.end]) {
		case keyType:
			fields.typ, i, ok = cborString(b, i)
			return i, ok
		case keyObject:
			fields.object = true
			return f.object(b, i, &fields)
		case keyKind, keyAPIVersion:
			// An envelope with its own kind would be looked up in the
			// scheme; leave that to the decoder.
			var s cborSpan
			s, i, ok = cborString(b, i)
			return i, ok && s.end == s.start
		}
		return cborSkip(b, i), true
	})
	if !ok || !fields.object || !fields.kind || !fields.apiVersion {
		return false
	}
	typ := eventTypeOf(b[fields.typ.start:fields.typ.end])
	switch {
	case typ == 0:
		return false
	case typ == Error:
		if !fields.statusOK {
			return false
		}
		*ev = Event{Type: typ}
		ev.setStatus(fields.code, b[fields.reason.start:fields.reason.end], fields.retryAfter)
	default:
		if !fields.annotationsOK {
			return false
		}
		*ev = Event{Type: typ}
		ev.setResumePoint(b[fields.rv.start:fields.rv.end], fields.eventsEnd)
	}
	return true
}

// object reads the event's object at b[i]: kind and apiVersion (as the
// serializer's Interpret), metadata, and the Status fields.
func (f *cborFields) object(b []byte, i int, fields *cborEventFields) (int, bool) {
	return f.eachPair(b, i, func(key cborSpan, value int) (int, bool) {
		var s cborSpan
		var ok bool
		i := value
		switch string(b[key.start:key.end]) {
		case keyKind:
			s, i, ok = cborString(b, i)
			fields.kind = s.end > s.start
			return i, ok
		case keyAPIVersion:
			s, i, ok = cborString(b, i)
			fields.apiVersion = hasVersion(b[s.start:s.end])
			return i, ok
		case keyMetadata:
			if b[i] == cborNull {
				return i + 1, true
			}
			return f.metadata(b, i, fields)
		case keyCode:
			fields.code, i, ok = cborInt32(b, i)
		case keyReason:
			fields.reason, i, ok = cborString(b, i)
		case keyDetails:
			if b[i] == cborNull {
				return i + 1, true
			}
			i, ok = f.eachPair(b, i, func(key cborSpan, i int) (int, bool) {
				if string(b[key.start:key.end]) != keyRetryAfterSeconds {
					return cborSkip(b, i), true
				}
				var ok bool
				fields.retryAfter, i, ok = cborInt32(b, i)
				return i, ok
			})
		default:
			return cborSkip(b, i), true
		}
		if !ok {
			fields.statusOK = false
			return cborSkip(b, value), true
		}
		return i, true
	})
}

// metadata reads ObjectMeta (for an ERROR's Status, ListMeta, which has no
// annotations): its resourceVersion and annotations.
func (f *cborFields) metadata(b []byte, i int, fields *cborEventFields) (int, bool) {
	return f.eachPair(b, i, func(key cborSpan, i int) (int, bool) {
		var ok bool
		switch string(b[key.start:key.end]) {
		case keyResourceVersion:
			fields.rv, i, ok = cborString(b, i)
			return i, ok
		case keyAnnotations:
			if b[i] == cborNull {
				return i + 1, true
			}
			end, ok := f.eachEntry(b, i, func(key, value cborSpan) {
				if string(b[key.start:key.end]) == keyInitialEventsEnd {
					fields.eventsEnd = string(b[value.start:value.end]) == "true"
				}
			})
			if !ok {
				fields.annotationsOK = false
				return cborSkip(b, i), true
			}
			return end, true
		}
		return cborSkip(b, i), true
	})
}

// eachPair walks the map at b[i] (after self-described tags) as a struct
// decode does: every key must be a string of valid UTF-8, none twice. It
// calls read with each key and the offset of its value; read returns the
// offset after the value, or false to give up. eachPair returns the offset
// after the map.
func (f *cborFields) eachPair(b []byte, i int, read func(key cborSpan, value int) (int, bool)) (int, bool) {
	i = skipSelfDescribed(b, i)
	if i < 0 {
		return i, false
	}
	return f.walkMap(b, i, read)
}

// eachEntry walks a map[string]string at b[i] as a map decode does: keys and
// values are strings (a null value is ""), no key twice. It returns the
// offset after the map.
func (f *cborFields) eachEntry(b []byte, i int, entry func(key, value cborSpan)) (int, bool) {
	return f.walkMap(b, i, func(key cborSpan, next int) (int, bool) {
		value, i, ok := cborString(b, next)
		if ok {
			entry(key, value)
		}
		return i, ok
	})
}

// walkMap walks the map at b[i]: every key a string of valid UTF-8, none
// twice, each value read by read (see eachPair).
func (f *cborFields) walkMap(b []byte, i int, read func(key cborSpan, value int) (int, bool)) (int, bool) {
	if b[i]>>5 != cborMap {
		return i, false
	}
	base := len(f.keys)
	defer func() { f.keys = f.keys[:base] }()
	count, i := cborCount(b, i)
	for n := 0; count < 0 && b[i] != cborBreak || n < count; n++ {
		key, next, ok := cborKey(b, i)
		if !ok || !f.newKey(b, base, key) {
			return i, false
		}
		if i, ok = read(key, next); !ok {
			return i, false
		}
	}
	return mapEnd(b, i, count), f.noDuplicates(b, base)
}

// mapEnd returns the offset after a map whose last pair ends at b[i]: past
// the "break" of an indefinite-length map (count < 0).
func mapEnd(b []byte, i, count int) int {
	if count < 0 {
		return i + 1
	}
	return i
}

// smallMap is the number of keys up to which duplicates are looked for as
// keys arrive; larger maps are sorted once at their end.
const smallMap = 16

// newKey records key among the keys of the map whose keys start at
// f.keys[base], and reports false if a small map already has it.
func (f *cborFields) newKey(b []byte, base int, key cborSpan) bool {
	keys := f.keys[base:]
	if len(keys) < smallMap {
		for _, k := range keys {
			if bytes.Equal(b[k.start:k.end], b[key.start:key.end]) {
				return false
			}
		}
	}
	f.keys = append(f.keys, key)
	return true
}

// noDuplicates checks a large map's keys, f.keys[base:], for duplicates.
func (f *cborFields) noDuplicates(b []byte, base int) bool {
	keys := f.keys[base:]
	if len(keys) <= smallMap {
		return true
	}
	f.sorted = append(f.sorted[:0], keys...)
	slices.SortFunc(f.sorted, func(x, y cborSpan) int { return bytes.Compare(b[x.start:x.end], b[y.start:y.end]) })
	for n := 1; n < len(f.sorted); n++ {
		x, y := f.sorted[n-1], f.sorted[n]
		if bytes.Equal(b[x.start:x.end], b[y.start:y.end]) {
			return false
		}
	}
	return true
}

// skipSelfDescribed returns the offset after the self-described CBOR tags
// at b[i] (which the decoder strips), or -1 if another tag comes first.
func skipSelfDescribed(b []byte, i int) int {
	for b[i]>>5 == cborTag {
		_, _, val, size, _ := cborHead(b[i:])
		if val != cborSelfDescribed {
			return -1
		}
		i += size
	}
	return i
}

// cborCount reads the head of the array or map at b[i]: its number of data
// items (pairs for a map), or -1 for an indefinite length, and the offset of
// its first data item.
func cborCount(b []byte, i int) (int, int) {
	_, ai, val, size, _ := cborHead(b[i:])
	if ai == cborIndefinite {
		return -1, i + size
	}
	return int(val), i + size
}

// cborKey reads a map key the fast path can match: a definite-length byte
// string, or text string of valid UTF-8.
func cborKey(b []byte, i int) (cborSpan, int, bool) {
	major, ai, val, size, _ := cborHead(b[i:])
	if major != cborBytes && major != cborText || ai == cborIndefinite {
		return cborSpan{}, i, false
	}
	key := cborSpan{i + size, i + size + int(val)}
	if major == cborText && !utf8.Valid(b[key.start:key.end]) {
		return cborSpan{}, i, false
	}
	return key, key.end, true
}

// cborString reads a value decoded into a Go string: a definite-length byte
// string (kube-apiserver writes strings as byte strings), a text string of
// valid UTF-8, or null, which leaves the string empty.
func cborString(b []byte, i int) (cborSpan, int, bool) {
	if b[i] == cborNull {
		return cborSpan{}, i + 1, true
	}
	return cborKey(b, i)
}

// cborInt32 reads a value decoded into an int32: an integer in range, or
// null, which leaves it 0.
func cborInt32(b []byte, i int) (int32, int, bool) {
	if b[i] == cborNull {
		return 0, i + 1, true
	}
	major, _, val, size, _ := cborHead(b[i:])
	switch {
	case major != cborUint && major != cborNint, val > 1<<31-1:
		return 0, i, false
	case major == cborNint:
		return int32(-1 - int64(val)), i + size, true
	}
	return int32(val), i + size, true
}

// cborSkip returns the offset after the well-formed data item at b[i].
func cborSkip(b []byte, i int) int {
	major, ai, val, size, _ := cborHead(b[i:])
	i += size
	if ai == cborIndefinite {
		for b[i] != cborBreak {
			i = cborSkip(b, i)
		}
		return i + 1
	}
	switch major {
	case cborBytes, cborText:
		return i + int(val)
	case cborArray:
		for range val {
			i = cborSkip(b, i)
		}
	case cborMap:
		for range 2 * val {
			i = cborSkip(b, i)
		}
	case cborTag:
		return cborSkip(b, i)
	}
	return i
}
