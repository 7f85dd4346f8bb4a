// Package frame finds whole events in a Kubernetes watch stream and reads
// what a resuming watch needs from each one, without decoding the object.
//
// It owns the two wire formats an API server uses for watches:
//
//   - JSON (application/json;stream=watch): self-delimiting WatchEvent
//     objects, optionally separated by whitespace;
//   - protobuf (application/vnd.kubernetes.protobuf;stream=watch): a 4-byte
//     big-endian length, then a raw metav1.WatchEvent whose object is
//     "k8s\x00" followed by a runtime.Unknown.
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
// [EncodeError] builds the other direction: one ERROR event in a stream's
// encoding, used to deliver an API server's 410 answer to a resume request
// in-stream.
package frame
