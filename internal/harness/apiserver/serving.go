package apiserver

import "crypto/tls"

// ServingCertificate is the key pair every kube-apiserver of the cluster serves with (valid for
// 127.0.0.1 and localhost, signed by CAData), for a test server that must stand where a
// kube-apiserver stands, e.g. an HTTP-level fault injector in front of one.
func (c *Cluster) ServingCertificate() (tls.Certificate, error) {
	return tls.LoadX509KeyPair(c.pki.servingCert, c.pki.servingKey)
}
