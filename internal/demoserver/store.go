package demoserver

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// change is one entry of the history: what a write did, at which resourceVersion.
type change struct {
	kind   watch.EventType // Added, Modified or Deleted
	object *corev1.ConfigMap
	rv     uint64
	frames *frames
}

// frames holds one change's watch frame per media type: every watch sends the same bytes
// for it, so it is encoded once per media type, not once per watch.
type frames struct {
	mu     sync.Mutex
	byType map[string][]byte
}

// frame returns the change as a watch frame in cd's media type.
func (ch change) frame(cd codec) ([]byte, error) {
	ch.frames.mu.Lock()
	defer ch.frames.mu.Unlock()
	if frame, ok := ch.frames.byType[cd.mediaType]; ok {
		return frame, nil
	}
	frame, err := cd.frame(ch.kind, ch.object)
	if err != nil {
		return nil, err
	}
	if ch.frames.byType == nil {
		ch.frames.byType = make(map[string][]byte, 2)
	}
	ch.frames.byType[cd.mediaType] = frame
	return frame, nil
}

// store is the ConfigMap collection with its full write history. Stored objects are never
// mutated after they are stored, so they can be shared without copying.
type store struct {
	mu        sync.Mutex
	namespace string
	rng       *rand.Rand
	target    int // the object count the writer drifts around
	nextName  int

	rv      uint64                       // the current resourceVersion (etcd revision)
	floor   uint64                       // oldest RV a watch or continue token may start from
	objects map[string]*corev1.ConfigMap // current state
	base    map[string]*corev1.ConfigMap // state at baseRV, the start of history
	baseRV  uint64
	history []change // every change after baseRV, in RV order

	changed chan struct{} // closed and replaced on every write
}

func newStore(namespace string, objects int, seed uint64) *store {
	s := &store{
		namespace: namespace,
		rng:       rand.New(rand.NewPCG(seed, 0x6b7265747279)), // "kretry"
		target:    objects,
		objects:   make(map[string]*corev1.ConfigMap, objects),
		changed:   make(chan struct{}),
		rv:        1,
	}
	for range objects {
		s.createLocked()
	}
	s.history = nil // the seed objects are the base state, not events
	s.base = make(map[string]*corev1.ConfigMap, len(s.objects))
	for name, obj := range s.objects {
		s.base[name] = obj
	}
	s.baseRV = s.rv
	s.floor = s.rv
	return s
}

// step makes one seeded random change (create, update or delete) and returns its RV.
func (s *store) step() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stepLocked()
}

func (s *store) stepLocked() uint64 {
	n := len(s.objects)
	roll := s.rng.IntN(10)
	switch {
	case n == 0 || (roll < 2 && n <= s.target):
		s.createLocked()
	case roll < 2 || (roll < 4 && n >= s.target):
		s.deleteLocked(s.pickLocked())
	default:
		s.updateLocked(s.pickLocked())
	}
	return s.rv
}

// pickLocked returns a seeded random existing name, independent of map iteration order.
func (s *store) pickLocked() string {
	names := make([]string, 0, len(s.objects))
	for name := range s.objects {
		names = append(names, name)
	}
	sort.Strings(names)
	return names[s.rng.IntN(len(names))]
}

func (s *store) createLocked() {
	s.rv++
	name := fmt.Sprintf("cm-%05d", s.nextName)
	s.nextName++
	obj := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         s.namespace,
			UID:               types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", s.nextName)),
			ResourceVersion:   strconv.FormatUint(s.rv, 10),
			CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000+int64(s.rv), 0).UTC()),
			Labels:            map[string]string{"app.kubernetes.io/name": "kretry-demo"},
		},
		Data: map[string]string{"generation": "1", "value": s.valueLocked()},
	}
	s.recordLocked(watch.Added, obj)
}

func (s *store) updateLocked(name string) {
	s.rv++
	obj := s.objects[name].DeepCopy()
	obj.ResourceVersion = strconv.FormatUint(s.rv, 10)
	generation, _ := strconv.Atoi(obj.Data["generation"])
	obj.Data["generation"] = strconv.Itoa(generation + 1)
	obj.Data["value"] = s.valueLocked()
	s.recordLocked(watch.Modified, obj)
}

func (s *store) deleteLocked(name string) {
	s.rv++
	obj := s.objects[name].DeepCopy()
	obj.ResourceVersion = strconv.FormatUint(s.rv, 10) // as the apiserver: the deletion's RV
	s.recordLocked(watch.Deleted, obj)
}

func (s *store) valueLocked() string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 24)
	for i := range b {
		b[i] = letters[s.rng.IntN(len(letters))]
	}
	return string(b)
}

func (s *store) recordLocked(kind watch.EventType, obj *corev1.ConfigMap) {
	if kind == watch.Deleted {
		delete(s.objects, obj.Name)
	} else {
		s.objects[obj.Name] = obj
	}
	s.history = append(s.history, change{kind: kind, object: obj, rv: s.rv, frames: &frames{}})
	close(s.changed)
	s.changed = make(chan struct{})
}

// advancePast returns the current RV, after one write first if upTo is not behind it: a
// compaction floor that makes upTo too old.
func (s *store) advancePast(upTo uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if upTo >= s.rv {
		s.stepLocked()
	}
	return s.rv
}

// compactNow raises the floor to the current RV and returns it.
func (s *store) compactNow() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.floor = s.rv
	return s.floor
}

// since returns the changes after rv (at most limit), the current RV and the channel that
// is closed on the next write.
func (s *store) since(rv uint64, limit int) ([]change, uint64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.history), func(i int) bool { return s.history[i].rv > rv })
	end := min(len(s.history), i+limit)
	return s.history[i:end], s.rv, s.changed
}

// snapshot returns the objects as of rv, sorted by name: the current state for the
// current RV (or newer), else the base state replayed up to rv. Callers check rv against
// the floor first.
func (s *store) snapshot(rv uint64) []*corev1.ConfigMap {
	s.mu.Lock()
	defer s.mu.Unlock()
	var state map[string]*corev1.ConfigMap
	if rv >= s.rv {
		state = s.objects
	} else {
		state = make(map[string]*corev1.ConfigMap, len(s.base))
		for name, obj := range s.base {
			state[name] = obj
		}
		for _, c := range s.history {
			if c.rv > rv {
				break
			}
			if c.kind == watch.Deleted {
				delete(state, c.object.Name)
			} else {
				state[c.object.Name] = c.object
			}
		}
	}
	out := make([]*corev1.ConfigMap, 0, len(state))
	for _, obj := range state {
		out = append(out, obj)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// get returns the current object of that name, or nil.
func (s *store) get(name string) *corev1.ConfigMap {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objects[name]
}

// versions returns the current RV and floor.
func (s *store) versions() (current, floor uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rv, s.floor
}
