// Package scripts holds the tests of the shell scripts beside it (the
// directories below are commands of their own).
package scripts
