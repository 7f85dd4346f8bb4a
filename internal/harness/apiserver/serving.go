package apiserver

import "crypto/tls"

// ServingCertificate is the key pair the first kube-apiserver of the cluster serves with (valid
// for 127.0.0.1 and localhost, signed by CAData), for a test server that must stand where a
// kube-apiserver stands, e.g. an HTTP-level fault injector in front of one.
func (c *Cluster) ServingCertificate() (tls.Certificate, error) {
	cert, key, err := c.pki.servingPair(0)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.LoadX509KeyPair(cert, key)
}
