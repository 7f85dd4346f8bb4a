// Package status reads the metav1.Status an API server puts in an error
// answer or a watch ERROR event, in JSON or protobuf, without a scheme.
package status
