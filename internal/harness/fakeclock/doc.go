// Package fakeclock is a virtual policy.Clock for kretry's own tests.
package fakeclock
