// Package frame finds whole events in a Kubernetes watch stream and reads
// what a resuming watch needs from each one, without decoding the object.
//
// It owns the three wire formats an API server uses for watches:
//
//   - JSON (application/json;stream=watch): self-delimiting WatchEvent
//     objects, optionally separated by whitespace;
//   - protobuf (application/vnd.kubernetes.protobuf;stream=watch): a 4-byte
//     big-endian length, then a raw metav1.WatchEvent whose object is
//     "k8s\x00" followed by a runtime.Unknown;
//   - CBOR (application/cbor-seq, served behind kube-apiserver's
//     CBORServingAndStorage gate to clients with client-go's
//     ClientsAllowCBOR gate): one self-delimiting CBOR data item per
//     WatchEvent, no framing, the object embedded as its own data item.
//
// A [Scanner] returns each frame as the exact bytes read (so a proxy can pass
// them on byte for byte) together with the event's type, its
// metadata.resourceVersion, the initial-events-end bookmark annotation and,
// for ERROR events, the Status code, reason and retryAfterSeconds.
//
// Why a package of its own: the resuming watch body (package watchretry) must
// know where a frame ends and which resourceVersion it carries before it hands
// the frame to client-go, and it must never take a resume point from a frame
// that client-go would reject or that a broken connection cut short. The
// scanner accepts exactly the frames client-go's own watch decoders accept
// (tests and fuzz targets use those decoders as the oracle) while staying
// allocation-free per event and several times faster than a full decode.
//
// CBOR: what is hand-written and why. client-go reads a CBOR watch with
// fxamacker/cbor (its Decoder finds each data item, then apimachinery's
// serializer decodes it in a lax decode mode) and this package follows both:
//
//   - Finding the end of a data item is hand-written (cborframe.go): the
//     Decoder, and fxamacker's Wellformed, check an item only when it is all
//     in memory and start over from its first byte on every read, which is
//     quadratic on a slow connection and cannot say where a torn item stopped.
//     The walk here goes on from where it stopped, keeps at most 32 levels,
//     and applies the same checks in the same order (the Decoder's default
//     limits of 32 levels and 131072 elements, reserved heads, chunk types;
//     then, once the item is whole, the decode mode's refusal of NaN,
//     infinities and bignums), so a torn item and an invalid one are told
//     apart exactly as client-go tells them apart.
//   - Reading the fields of a whole item is hand-written for the shapes
//     kube-apiserver writes (cborevent.go): maps of definite or indefinite
//     length, strings as byte or text strings, the self-described tag. Done
//     with fxamacker's struct decoding it would cost an allocation per event
//     for every unknown key (its duplicate-key check builds a map) and for
//     every string it returns. The reading applies the typed decode's rules
//     to the fields it reads: exact key match, no duplicate keys in a map
//     the decode reads, valid UTF-8 in text strings, null leaving a field
//     empty, int32 range.
//   - Everything else (other tags, indefinite-length strings, integer keys,
//     undefined, and every frame that does not decode) goes to apimachinery's
//     own CBOR serializer over fxamacker (cbordecode.go), the decoder client-go
//     runs, which allocates but is exact. kube-apiserver never writes such
//     frames; tests check that both paths agree wherever the fast one reads.
//
// [EncodeError] builds the other direction: one ERROR event in a stream's
// encoding, used to deliver an API server's 410 answer to a resume request
// in-stream.
package frame
