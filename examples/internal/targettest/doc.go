// Package targettest holds what the examples' tests share: a demo server per test, and
// ways to call an example's run function against it, in the foreground or in the
// background, and to wait for it to catch up.
package targettest
