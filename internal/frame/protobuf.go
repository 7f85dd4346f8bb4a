package frame

import (
	"encoding/binary"
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
)

// protoPrefix starts every object the protobuf serializer writes ("k8s\0").
var protoPrefix = [4]byte{'k', '8', 's', 0}

// Reasons a protobuf frame is invalid. The field walk mirrors the generated
// (gogo) Unmarshal methods client-go runs, quirks included, so it accepts and
// refuses what they do; protowire's own Consume functions are stricter (they
// refuse 10-byte varints with a large last byte and field numbers >= 2^29,
// which the generated code takes). It reads every field of the messages
// that say what the scanner reports (the envelope: WatchEvent,
// RawExtension, runtime.Unknown, TypeMeta; the object's top level and its
// ObjectMeta; an ERROR's Status), skipping by its length each field it
// does not need, and enters no other message: the annotations only for a
// BOOKMARK, none of the object's other nested messages.
var (
	errProtoEmpty     = errors.New("empty watch event")
	errProtoTruncated = errors.New("protobuf field runs past its message")
	errProtoOverflow  = errors.New("protobuf varint overflows 64 bits")
	errProtoLength    = errors.New("negative protobuf length")
	errProtoTag       = errors.New("illegal protobuf tag")
	errProtoEndGroup  = errors.New("protobuf end group without a group")
	errProtoWireType  = errors.New("protobuf field has the wrong wire type")
	errNoRaw          = errors.New("watch event object is empty")
	errNoPrefix       = errors.New(`watch event object does not start with "k8s\x00"`)
	errEmptyBody      = errors.New("watch event object has nothing after its prefix")
)

// Messages the scanner walks.
const (
	msgWatchEvent = iota
	msgRawExtension
	msgUnknown
	msgTypeMeta
	msgObject // any typed object: ObjectMeta is field 1
	msgObjectMeta
	msgStatus
	msgListMeta
	msgStatusDetails
	msgCount
)

// wireTypes lists, for each message, the wire type of each field the
// generated code knows (as wire type + 1; 0 is an unknown field, skipped).
// Numbers are from generated.proto of k8s.io/apimachinery v0.37.2.
var wireTypes = [msgCount][]int8{
	msgWatchEvent:    {1: bytesField, 2: bytesField},
	msgRawExtension:  {1: bytesField},
	msgUnknown:       {1: bytesField, 2: bytesField, 3: bytesField, 4: bytesField},
	msgTypeMeta:      {1: bytesField, 2: bytesField},
	msgObject:        {1: bytesField},
	msgObjectMeta:    {1: bytesField, 2: bytesField, 3: bytesField, 4: bytesField, 5: bytesField, 6: bytesField, 7: varintField, 8: bytesField, 9: bytesField, 10: varintField, 11: bytesField, 12: bytesField, 13: bytesField, 14: bytesField, 17: bytesField},
	msgStatus:        {1: bytesField, 2: bytesField, 3: bytesField, 4: bytesField, 5: bytesField, 6: varintField},
	msgListMeta:      {1: bytesField, 2: bytesField, 3: bytesField, 4: varintField, 5: bytesField},
	msgStatusDetails: {1: bytesField, 2: bytesField, 3: bytesField, 4: bytesField, 5: varintField, 6: bytesField},
}

const (
	varintField = int8(protowire.VarintType) + 1
	bytesField  = int8(protowire.BytesType) + 1
)

// protoScanner holds what the fields of one protobuf frame say, as spans
// of the frame's body: offsets rather than slices, so that recording a
// field stores no pointer (no write barrier while the collector runs, which
// under a decoder's allocations is much of the time).
type protoScanner struct {
	// kept holds the fields kept, by the action that keeps them: type,
	// raw, apiVersion, kind, object, resourceVersion, reason.
	kept       [pbKeepReason + 1]pbSpan
	eventsEnd  bool
	code       int32
	retryAfter int32
	// bookmark is set while a BOOKMARK's object is walked: only there do
	// the annotations matter (initial-events-end).
	bookmark bool
	// walkOnly turns the envelope and ObjectMeta fast paths off, for the
	// tests that check they record what walk records (checkProtoFastPaths).
	walkOnly bool
}

// field returns the bytes of the field action kept, in body.
func (p *protoScanner) field(action pbAction, body []byte) []byte { return p.kept[action].in(body) }

// pbSpan is body[start:end] of the frame being walked.
type pbSpan struct{ start, end int }

func (sp pbSpan) in(body []byte) []byte { return body[sp.start:sp.end] }

func (p *protoScanner) reset() { *p = protoScanner{walkOnly: p.walkOnly} }

// nextProtobuf is Scan for protobuf streams.
func (s *Scanner) nextProtobuf(f *Frame) error {
	for s.end-s.start < 4 {
		if !s.fillFrame(s.lastFrame) {
			*f = Frame{}
			return s.endOfStream(s.end > s.start)
		}
	}
	size := binary.BigEndian.Uint32(s.buf[s.start:])
	if uint64(size) > uint64(s.maxSize) {
		*f = Frame{}
		return s.fail(s.tooLarge(int(size)))
	}
	total := 4 + int(size)
	for s.end-s.start < total {
		if !s.fillFrame(total) {
			*f = Frame{}
			return s.endOfStream(true)
		}
	}
	s.lastFrame = total
	f.Raw = s.buf[s.start : s.start+total]
	if err := s.proto.event(f.Raw[4:], &f.Event); err != nil {
		*f = Frame{}
		return s.invalid(0, err)
	}
	s.returned = total
	return nil
}

// largeFrame is the length from which a protobuf frame is read on its own
// (see fillFrame).
const largeFrame = 16 << 10

// fillFrame is fill for the protobuf frame that starts at s.start, of
// total bytes (its length prefix included; before the prefix is read, the
// last frame's length stands in for it). A frame of at least largeFrame
// bytes is read into a place in the buffer it fits in, and no further than
// its last byte: were reads to run on into the next frame, that frame would
// reach the end of the buffer and be moved to its front, copied once more
// than the frames client-go's framer reads without kretry (one read each,
// of the frame's length). A run of such frames is read one frame a read,
// each to the front of the buffer, and never moved. Smaller frames are read
// as many a read as the buffer holds.
func (s *Scanner) fillFrame(total int) bool {
	if total >= largeFrame {
		return s.fillLarge(total)
	}
	return s.fill()
}

// fillLarge is fillFrame for a frame of at least largeFrame bytes, not yet
// whole in the buffer.
func (s *Scanner) fillLarge(total int) bool {
	if s.readErr != nil {
		return s.fill()
	}
	if s.start > 0 && s.start+total > len(s.buf) {
		// Moved now, while little of it is in, rather than once the buffer
		// is full of it.
		s.end = copy(s.buf, s.buf[s.start:s.end])
		s.start = 0
	}
	s.makeRoom()
	return s.read(min(len(s.buf), s.start+total))
}

// event reads a raw metav1.WatchEvent and fills ev, checking what
// client-go's watch decoder checks: the event, its type, the object's
// "k8s\0" + runtime.Unknown wrapper and its kind, then the object's metadata
// (or, for ERROR, the Status fields).
func (p *protoScanner) event(body []byte, ev *Event) error {
	p.reset()
	if len(body) == 0 {
		return errProtoEmpty
	}
	envelope := !p.walkOnly && p.envelope(body)
	if !envelope {
		if err := p.walk(msgWatchEvent, body, 0); err != nil {
			return err
		}
	}
	typ := eventTypeOf(p.field(pbKeepType, body))
	if typ == 0 {
		return &unknownTypeError{name: string(p.field(pbKeepType, body))}
	}
	raw := p.field(pbKeepRaw, body)
	switch {
	case len(raw) == 0:
		return errNoRaw
	case len(raw) < len(protoPrefix) || [4]byte(raw) != protoPrefix:
		return errNoPrefix
	case len(raw) == len(protoPrefix):
		return errEmptyBody
	}
	if !envelope {
		if err := p.walk(msgUnknown, body[:p.kept[pbKeepRaw].end], p.kept[pbKeepRaw].start+len(protoPrefix)); err != nil {
			return err
		}
	}
	object := p.kept[pbKeepObject]
	if len(p.field(pbKeepKind, body)) == 0 || !hasVersion(p.field(pbKeepAPIVersion, body)) {
		return errObjectTypeMeta
	}
	*ev = Event{Type: typ}
	if typ == Error {
		if err := p.walk(msgStatus, body[:object.end], object.start); err != nil {
			return err
		}
		ev.setStatus(p.code, p.field(pbKeepReason, body), p.retryAfter)
		return nil
	}
	p.bookmark = typ == Bookmark
	if err := p.walk(msgObject, body[:object.end], object.start); err != nil {
		return err
	}
	ev.setResumePoint(p.field(pbKeepResourceVersion, body), p.eventsEnd)
	return nil
}

// envelope reads the event's envelope when it is laid out exactly as
// kube-apiserver's serializer writes it, each field once, in order, with
// one-byte tags and lengths of one or two bytes:
//
//	WatchEvent{1: type, 2: RawExtension{1: raw = "k8s\0" + Unknown{
//		1: TypeMeta{1: apiVersion, 2: kind}, 2: object, 3: contentEncoding, 4: contentType}}}
//
// There walk would record the same spans and find nothing else and no
// error: envelope records them and reports true. On any other layout it
// records nothing and reports false, and walk reads the envelope field by
// field. (event checks the type, the prefix and the kind either way.)
func (p *protoScanner) envelope(body []byte) bool {
	// Each field starts where the one before it ended (or, for the first
	// field of a message, where the message's bytes start); a field that is
	// not there puts the positions after it nowhere.
	typeStart, typeEnd := pbTagged(body, 0, 0x0a)
	extStart, extEnd := pbTagged(body, typeEnd, 0x12)
	rawStart, rawEnd := pbTagged(body, extStart, 0x0a)
	typeMetaStart, typeMetaEnd := pbTagged(body, rawStart+len(protoPrefix), 0x0a)
	apiVersionStart, apiVersionEnd := pbTagged(body, typeMetaStart, 0x0a)
	kindStart, kindEnd := pbTagged(body, apiVersionEnd, 0x12)
	objectStart, objectEnd := pbTagged(body, typeMetaEnd, 0x12)
	_, encodingEnd := pbTagged(body, objectEnd, 0x1a)
	_, contentTypeEnd := pbTagged(body, encodingEnd, 0x22)
	// Positions only grow along a message's fields: its last field ending
	// exactly where it ends puts every field before it inside it.
	if kindEnd != typeMetaEnd || contentTypeEnd != rawEnd || rawEnd != extEnd || extEnd != len(body) {
		return false
	}
	p.kept[pbKeepType] = pbSpan{typeStart, typeEnd}
	p.kept[pbKeepRaw] = pbSpan{rawStart, rawEnd}
	p.kept[pbKeepAPIVersion] = pbSpan{apiVersionStart, apiVersionEnd}
	p.kept[pbKeepKind] = pbSpan{kindStart, kindEnd}
	p.kept[pbKeepObject] = pbSpan{objectStart, objectEnd}
	return true
}

// pbTagged reads the field at b[i] if its tag is tag (one byte) and its
// length one or two bytes, and returns the bounds of its bytes, which may
// run past b (the caller checks). Otherwise, or when i is at or past the
// end of b, it returns pbNowhere for both: no field starts there either.
func pbTagged(b []byte, i int, tag byte) (start, end int) {
	if i+1 >= len(b) || b[i] != tag {
		return pbNowhere, pbNowhere
	}
	n := int(b[i+1])
	if n < 0x80 {
		return i + 2, i + 2 + n
	}
	if i+2 >= len(b) || b[i+2] >= 0x80 {
		return pbNowhere, pbNowhere
	}
	return i + 3, i + 3 + (n&0x7f | int(b[i+2])<<7)
}

// pbNowhere is a position past any frame.
const pbNowhere = 1 << 62

// pbAction is what walk does with a field whose tag is one byte (field
// numbers 1-15), the form of nearly every field it meets: a
// length-delimited one with a length of one or two bytes is read inline,
// without the general path (general) and its table lookups.
type pbAction uint8

const (
	// pbGeneral: anything else (a field number the message reads as a
	// varint, field 0, another wire type): general decides, as the
	// generated code would.
	pbGeneral pbAction = iota
	// Fields kept (recorded in protoScanner.kept).
	pbKeepType
	pbKeepRaw
	pbKeepAPIVersion
	pbKeepKind
	pbKeepObject
	pbKeepResourceVersion
	pbKeepReason
	// pbSkip: a length-delimited field the scanner does not need (unknown
	// to the message, or known and of no interest): skipped by its length.
	pbSkip
	// pbSkipVarint: a varint field the scanner does not need, of one or
	// two bytes (ObjectMeta's generation).
	pbSkipVarint
	pbAnnotation
	// Messages walked in turn (see pbEntered).
	pbRawExtension
	pbTypeMeta
	pbObjectMeta
	pbListMeta
	pbStatusDetails
)

// pbEntered is the message each action from pbRawExtension on walks.
var pbEntered = [...]int{
	pbRawExtension:  msgRawExtension,
	pbTypeMeta:      msgTypeMeta,
	pbObjectMeta:    msgObjectMeta,
	pbListMeta:      msgListMeta,
	pbStatusDetails: msgStatusDetails,
}

// pbActions names, for each message, the fields walk does more with than
// skip them: length-delimited fields kept or entered, and the varint fields
// whose value general reads (pbGeneral). Every other field is skipped.
var pbActions = [msgCount]map[int]pbAction{
	msgWatchEvent:    {1: pbKeepType, 2: pbRawExtension},
	msgRawExtension:  {1: pbKeepRaw},
	msgUnknown:       {1: pbTypeMeta, 2: pbKeepObject},
	msgTypeMeta:      {1: pbKeepAPIVersion, 2: pbKeepKind},
	msgObject:        {1: pbObjectMeta},
	msgObjectMeta:    {6: pbKeepResourceVersion, 12: pbAnnotation},
	msgStatus:        {1: pbListMeta, 4: pbKeepReason, 5: pbStatusDetails, 6: pbGeneral},
	msgStatusDetails: {5: pbGeneral},
}

// oneByteTags gives, for each message the scanner walks, the action for
// each one-byte tag; for a known length-delimited field it is also what
// general does with it. It is made from wireTypes and pbActions, so walk
// and general read each field alike.
var oneByteTags = oneByteTable()

// oneByteTable makes oneByteTags: a field's action where its tag has the
// wire type wireTypes gives it (the length-delimited wire type for a field
// the message does not know: skipped by its length), pbGeneral for every
// other tag, which general reads or refuses as the generated code does.
func oneByteTable() (table [msgCount][0x80]pbAction) {
	for msg := range table {
		for num := 1; num < 16; num++ {
			wire, skip := int8(bytesField), pbSkip
			if num < len(wireTypes[msg]) && wireTypes[msg][num] == varintField {
				wire, skip = varintField, pbSkipVarint
			}
			action, ok := pbActions[msg][num]
			if !ok {
				action = skip
			}
			table[msg][num<<3|int(wire-1)] = action
		}
		for num, action := range pbActions[msg] {
			// A kept field needs a one-byte tag and a length: general finds
			// its action here.
			if num >= 16 || (action == pbGeneral) != (wireTypes[msg][num] == varintField) {
				panic("frame: pbActions disagrees with wireTypes")
			}
		}
	}
	return table
}

// walk reads the fields of message msg, b[i:], as its generated Unmarshal
// does, recording those the scanner needs as spans of b (positions in b
// are positions in the frame's body: b is the body up to the message's
// end). Nearly every field has a one-byte tag and a length under 16 KiB:
// walk reads those inline, as the message's row of oneByteTags says; general
// takes the rest.
func (p *protoScanner) walk(msg int, b []byte, i int) error {
	tags := &oneByteTags[msg]
	for i < len(b) {
		c := b[i]
		action := tags[c&0x7f]
		if c >= 0x80 || action == pbGeneral || i+1 == len(b) {
			var err error
			if i, err = p.general(msg, b, i); err != nil {
				return err
			}
			continue
		}
		// The length (or the varint) in one byte, or two.
		start, end := i+2, i+2+int(b[i+1])
		if b[i+1] >= 0x80 {
			if i+2 == len(b) || b[i+2] >= 0x80 {
				var err error
				if i, err = p.general(msg, b, i); err != nil {
					return err
				}
				continue
			}
			start, end = i+3, i+3+(int(b[i+1])&0x7f|int(b[i+2])<<7)
		}
		if action == pbSkipVarint {
			i = start // read as a length, the varint ends where the bytes would start
			continue
		}
		if end > len(b) {
			return errProtoTruncated
		}
		i = end
		if action == pbSkip {
			continue
		}
		if err := p.act(action, b, start, end); err != nil {
			return err
		}
	}
	return nil
}

// objectMeta walks an ObjectMeta, b[i:]. Its head as kube-apiserver's
// serializer writes it (name, generateName, namespace, selfLink, uid,
// resourceVersion, generation, creationTimestamp: fields 1 to 8, each once,
// in order, with one-byte tags and lengths of one or two bytes) is read in
// one pass, recording what walk would record there; walk reads the rest,
// or the whole message when its head is laid out otherwise.
func (p *protoScanner) objectMeta(b []byte, i int) error {
	_, end := pbTagged(b, i, 1<<3|2)
	_, end = pbTagged(b, end, 2<<3|2)
	_, end = pbTagged(b, end, 3<<3|2)
	_, end = pbTagged(b, end, 4<<3|2)
	_, end = pbTagged(b, end, 5<<3|2)
	rvStart, rvEnd := pbTagged(b, end, 6<<3|2)
	end = pbNowhere
	if rvEnd+2 < len(b) && b[rvEnd] == 7<<3 { // generation, a varint of one byte or two
		switch {
		case b[rvEnd+1] < 0x80:
			end = rvEnd + 2
		case b[rvEnd+2] < 0x80:
			end = rvEnd + 3
		}
	}
	if _, end = pbTagged(b, end, 8<<3|2); end <= len(b) {
		p.kept[pbKeepResourceVersion] = pbSpan{rvStart, rvEnd}
		i = end
	}
	return p.walk(msgObjectMeta, b, i)
}

// act does what action says with the field b[start:end] of a message that
// ends with b.
func (p *protoScanner) act(action pbAction, b []byte, start, end int) error {
	switch {
	case action == pbObjectMeta && !p.walkOnly:
		return p.objectMeta(b[:end], start)
	case action >= pbRawExtension:
		return p.walk(pbEntered[action], b[:end], start)
	case action == pbAnnotation:
		if p.bookmark {
			return p.annotation(b, start, end)
		}
	case action >= pbKeepType && action <= pbKeepReason:
		p.kept[action] = pbSpan{start, end}
	}
	return nil
}

// general reads the field of message msg that starts at b[i], where b ends
// with the message, and returns the position after it: every case the
// generated Unmarshal handles (multi-byte tags and lengths, varints, wrong
// wire types, unknown fields of any wire type), for every message the
// scanner walks.
func (p *protoScanner) general(msg int, b []byte, i int) (int, error) {
	table := wireTypes[msg]
	pre := i
	wire, i, err := pbVarint(b, i)
	if err != nil {
		return 0, err
	}
	num, typ := int32(wire>>3), protowire.Type(wire&7)
	if typ == protowire.EndGroupType {
		return 0, errProtoEndGroup
	}
	if num <= 0 {
		return 0, errProtoTag
	}
	if int(num) >= len(table) || table[num] == 0 {
		return skipField(b, pre, len(b))
	}
	if int8(typ)+1 != table[num] {
		return 0, errProtoWireType
	}
	if typ == protowire.VarintType {
		v, next, err := pbVarint(b, i)
		if err != nil {
			return 0, err
		}
		switch {
		case msg == msgStatus && num == 6:
			p.code = int32(v)
		case msg == msgStatusDetails && num == 5:
			p.retryAfter = int32(v)
		}
		return next, nil
	}
	start, end, err := pbLength(b, i)
	if err != nil {
		return 0, err
	}
	action := pbSkip // every known field past 15 (ObjectMeta's managedFields)
	if num < 16 {
		action = oneByteTags[msg][num<<3|int32(protowire.BytesType)]
	}
	err = p.act(action, b, start, end)
	return end, err
}

// annotation reads one ObjectMeta annotations map entry, b[i:end], as the
// generated code does: key (1) and value (2) are read as strings whatever
// their wire type, and may run past the entry up to the end of ObjectMeta.
func (p *protoScanner) annotation(b []byte, i, end int) error {
	var key, value []byte
	for i < end {
		pre := i
		wire, next, err := pbVarint(b, i)
		if err != nil {
			return err
		}
		i = next
		num := int32(wire >> 3) // truncated, as the generated code does
		if num != 1 && num != 2 {
			if i, err = skipField(b, pre, end); err != nil {
				return err
			}
			continue
		}
		start, stop, err := pbLength(b, i)
		if err != nil {
			return err
		}
		if num == 1 {
			key = b[start:stop]
		} else {
			value = b[start:stop]
		}
		i = stop
	}
	if string(key) == "k8s.io/initial-events-end" {
		p.eventsEnd = string(value) == "true"
	}
	return nil
}

// pbVarint reads a varint at b[i] as the generated code does: at most ten
// bytes, bits past 64 dropped.
func pbVarint(b []byte, i int) (uint64, int, error) {
	if i < len(b) && b[i] < 0x80 {
		return uint64(b[i]), i + 1, nil // tags and short lengths: one byte
	}
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, 0, errProtoOverflow
		}
		if i >= len(b) {
			return 0, 0, errProtoTruncated
		}
		c := b[i]
		i++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, i, nil
		}
	}
}

// pbLength reads a length at b[i] and returns the bounds of the bytes it
// announces, which must end within b.
func pbLength(b []byte, i int) (int, int, error) {
	v, i, err := pbVarint(b, i)
	if err != nil {
		return 0, 0, err
	}
	n := int(v)
	if n < 0 || i+n < 0 {
		return 0, 0, errProtoLength
	}
	if i+n > len(b) {
		return 0, 0, errProtoTruncated
	}
	return i, i + n, nil
}

// skipField skips the unknown field whose tag starts at b[i], which must end
// by limit, and returns the position after it.
func skipField(b []byte, i, limit int) (int, error) {
	n, err := skipGeneratedField(b[i:])
	if err != nil {
		return 0, err
	}
	if n < 0 || i+n < 0 {
		return 0, errProtoLength
	}
	if i+n > limit {
		return 0, errProtoTruncated
	}
	return i + n, nil
}

// skipGeneratedField returns the length of the field (tag included) at the
// start of b, as the generated skip functions compute it: groups are
// balanced by depth only, and a fixed-size value may claim bytes past b
// (the caller checks).
func skipGeneratedField(b []byte) (int, error) {
	i, depth := 0, 0
	for i < len(b) {
		wire, next, err := pbVarint(b, i)
		if err != nil {
			return 0, err
		}
		i = next
		switch protowire.Type(wire & 7) {
		case protowire.VarintType:
			if _, i, err = pbVarint(b, i); err != nil {
				return 0, err
			}
		case protowire.Fixed64Type:
			i += 8
		case protowire.BytesType:
			var length uint64
			if length, i, err = pbVarint(b, i); err != nil {
				return 0, err
			}
			if int(length) < 0 {
				return 0, errProtoLength
			}
			i += int(length)
		case protowire.StartGroupType:
			depth++
		case protowire.EndGroupType:
			if depth == 0 {
				return 0, errProtoEndGroup
			}
			depth--
		case protowire.Fixed32Type:
			i += 4
		default:
			return 0, errProtoWireType
		}
		if i < 0 {
			return 0, errProtoLength
		}
		if depth == 0 {
			return i, nil
		}
	}
	return 0, errProtoTruncated
}
