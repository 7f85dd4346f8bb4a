package listretry

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// headLimit bounds the head of a LIST body held back until its list
// metadata is known. Built-in lists carry it within the first few hundred
// bytes (a long continue token included); a body whose metadata has not
// ended by here is held whole instead.
const headLimit = 64 << 10

// headChunk is how much of the head is asked for per read.
const headChunk = 4 << 10

// verdict is what the head of a LIST body says about the rest of it.
type verdict uint8

const (
	// needMore: the head does not yet say.
	needMore verdict = iota
	// stream: the list metadata is known and the items follow it: the body
	// can be streamed and resumed at the list's resourceVersion.
	stream
	// hold: the body is not one kretry can resume mid-way (no metadata
	// before the items, no resourceVersion, not a list at all): it is held
	// whole, up to the buffer bound.
	hold
)

// listMeta is what a resume needs from a list's metadata.
type listMeta struct {
	resourceVersion string
	// hasContinue is set when the list is a page with more to come.
	hasContinue bool
}

// Media types whose lists are byte-identical when asked for again at the
// same resourceVersion, and carry that resourceVersion before their items.
const (
	mediaJSON     = "application/json"
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
)

// streamable returns the scanner for resp's head if its body may be
// streamed: a JSON or protobuf body the transport has not left encoded,
// asked for as a list rather than a Table (whose cells depend on the time
// of the request). Everything else (CBOR, whose map order is shuffled per
// response; a body the caller decodes itself) is held.
func streamable(req *http.Request, resp *http.Response) func([]byte) (listMeta, verdict) {
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return nil
	}
	if strings.Contains(req.Header.Get("Accept"), "as=Table") {
		return nil
	}
	switch mediaType(resp.Header.Get("Content-Type")) {
	case mediaJSON:
		return scanJSON
	case mediaProtobuf:
		return scanProtobuf
	}
	return nil
}

// mediaType is a Content-Type without its parameters, lower-cased.
func mediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// readHead reads body until scan gives a verdict, the body ends, or the
// head reaches headLimit (then: hold). It returns the bytes read; whole is
// set when they are the whole body. A read error is returned as it came.
func readHead(body io.Reader, scan func([]byte) (listMeta, verdict)) (head []byte, meta listMeta, v verdict, whole bool, err error) {
	head = make([]byte, 0, headChunk)
	for {
		if len(head) == cap(head) {
			head = append(head, make([]byte, min(cap(head), headLimit-len(head)))...)[:len(head)]
		}
		n, err := body.Read(head[len(head):cap(head)])
		head = head[:len(head)+n]
		if n > 0 {
			if meta, v = scan(head); v != needMore {
				return head, meta, v, false, nil
			}
		}
		switch {
		case err == io.EOF:
			return head, listMeta{}, hold, true, nil
		case err != nil:
			return nil, listMeta{}, hold, false, err
		case len(head) >= headLimit:
			return head, listMeta{}, hold, false, nil
		}
	}
}

// scanJSON reads a JSON list's head: the top-level keys up to and including
// the one that follows "metadata". A built-in list reads
// {"kind":..,"apiVersion":..,"metadata":{"resourceVersion":..,"continue":..},"items":[
// and streams; a custom resource's keys are sorted, so "items" comes before
// "metadata" and the body is held, as is a Table ("columnDefinitions"
// follows its metadata) and anything that is not an object.
func scanJSON(head []byte) (listMeta, verdict) {
	dec := json.NewDecoder(bytes.NewReader(head))
	if tok, err := dec.Token(); err != nil {
		return jsonVerdict(err)
	} else if tok != json.Delim('{') {
		return listMeta{}, hold
	}
	var meta *listMeta
	for {
		tok, err := dec.Token()
		if err != nil {
			return jsonVerdict(err)
		}
		key, ok := tok.(string)
		if !ok { // the object ended
			return listMeta{}, hold
		}
		if meta != nil {
			if key != "items" || meta.resourceVersion == "" {
				return listMeta{}, hold
			}
			return *meta, stream
		}
		switch key {
		case "metadata":
			var m struct {
				ResourceVersion string `json:"resourceVersion"`
				Continue        string `json:"continue"`
			}
			if err := dec.Decode(&m); err != nil {
				return jsonVerdict(err)
			}
			meta = &listMeta{resourceVersion: m.ResourceVersion, hasContinue: m.Continue != ""}
		case "items":
			return listMeta{}, hold
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return jsonVerdict(err)
			}
		}
	}
}

// jsonVerdict reads a decoding error of a head: the head ended too soon
// (read more), or the body is not what a list looks like (hold it).
func jsonVerdict(err error) (listMeta, verdict) {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return listMeta{}, needMore
	}
	return listMeta{}, hold
}

// protobufMagic starts every body kube-apiserver encodes in protobuf.
var protobufMagic = []byte("k8s\x00")

// Protobuf wire types the scanner meets.
const (
	wireVarint = 0
	wireBytes  = 2
)

// scanProtobuf reads a protobuf list's head: the magic, then a
// runtime.Unknown whose Raw (field 2) is the list, whose ListMeta (field 1)
// comes first; the list streams once its ListMeta is whole and is followed
// by its items (field 2) or nothing.
func scanProtobuf(head []byte) (listMeta, verdict) {
	if len(head) < len(protobufMagic) {
		if bytes.HasPrefix(protobufMagic, head) {
			return listMeta{}, needMore
		}
		return listMeta{}, hold
	}
	if !bytes.HasPrefix(head, protobufMagic) {
		return listMeta{}, hold
	}
	p := protoReader{buf: head, pos: len(protobufMagic)}
	// runtime.Unknown: skip to Raw.
	var rawEnd int
	for {
		field, wire, ok := p.tag()
		if !ok {
			return p.verdict()
		}
		if wire != wireBytes {
			return listMeta{}, hold
		}
		length, ok := p.varint()
		if !ok {
			return p.verdict()
		}
		if field == 2 {
			rawEnd = p.pos + int(length)
			break
		}
		if field == 1 {
			// TypeMeta: only a list's body has a ListMeta first.
			if p.pos+int(length) > len(p.buf) {
				return listMeta{}, needMore
			}
			if !isListKind(p.buf[p.pos : p.pos+int(length)]) {
				return listMeta{}, hold
			}
		}
		if !p.skip(length) {
			return p.verdict()
		}
	}
	// The list: ListMeta first.
	field, wire, ok := p.tag()
	if !ok {
		return p.verdict()
	}
	if field != 1 || wire != wireBytes {
		return listMeta{}, hold
	}
	length, ok := p.varint()
	if !ok {
		return p.verdict()
	}
	if length > headLimit {
		return listMeta{}, hold
	}
	if p.pos+int(length) > len(p.buf) {
		return listMeta{}, needMore
	}
	meta, ok := parseListMeta(p.buf[p.pos : p.pos+int(length)])
	if !ok || meta.resourceVersion == "" {
		return listMeta{}, hold
	}
	p.pos += int(length)
	if p.pos == rawEnd {
		return meta, stream // no items
	}
	if field, wire, ok = p.tag(); !ok {
		return p.verdict()
	}
	if field != 2 || wire != wireBytes {
		return listMeta{}, hold
	}
	return meta, stream
}

// isListKind reports whether a runtime.TypeMeta (apiVersion 1, kind 2)
// names a list kind.
func isListKind(typeMeta []byte) bool {
	p := protoReader{buf: typeMeta}
	for p.pos < len(typeMeta) {
		field, wire, ok := p.tag()
		if !ok || wire != wireBytes {
			return false
		}
		length, ok := p.varint()
		if !ok || p.pos+int(length) > len(typeMeta) {
			return false
		}
		if field == 2 {
			return bytes.HasSuffix(typeMeta[p.pos:p.pos+int(length)], []byte("List"))
		}
		p.pos += int(length)
	}
	return false
}

// parseListMeta reads a whole metav1.ListMeta: selfLink (1),
// resourceVersion (2), continue (3), remainingItemCount (4).
func parseListMeta(buf []byte) (listMeta, bool) {
	p := protoReader{buf: buf}
	var meta listMeta
	for p.pos < len(buf) {
		field, wire, ok := p.tag()
		if !ok {
			return listMeta{}, false
		}
		switch wire {
		case wireVarint:
			if _, ok := p.varint(); !ok {
				return listMeta{}, false
			}
		case wireBytes:
			length, ok := p.varint()
			if !ok || p.pos+int(length) > len(buf) {
				return listMeta{}, false
			}
			value := buf[p.pos : p.pos+int(length)]
			p.pos += int(length)
			switch field {
			case 2:
				meta.resourceVersion = string(value)
			case 3:
				meta.hasContinue = len(value) > 0
			}
		default:
			return listMeta{}, false
		}
	}
	return meta, true
}

// protoReader walks protobuf wire format. A read past the end of buf sets
// short: the head is incomplete, not invalid.
type protoReader struct {
	buf   []byte
	pos   int
	short bool
	bad   bool
}

// verdict is what a failed read means: read more, or hold.
func (p *protoReader) verdict() (listMeta, verdict) {
	if p.short && !p.bad {
		return listMeta{}, needMore
	}
	return listMeta{}, hold
}

func (p *protoReader) varint() (uint64, bool) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if p.pos >= len(p.buf) {
			p.short = true
			return 0, false
		}
		b := p.buf[p.pos]
		p.pos++
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v, true
		}
	}
	p.bad = true
	return 0, false
}

func (p *protoReader) tag() (field uint64, wire uint8, ok bool) {
	v, ok := p.varint()
	if !ok {
		return 0, 0, false
	}
	return v >> 3, uint8(v & 7), true
}

func (p *protoReader) skip(n uint64) bool {
	if n > uint64(len(p.buf)-p.pos) {
		p.short = true
		if n > headLimit {
			p.bad = true
		}
		return false
	}
	p.pos += int(n)
	return true
}
