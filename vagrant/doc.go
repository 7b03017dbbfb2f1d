// Package vagrant holds no code: it is the home of the tests of the
// Vagrant lab in this directory (Vagrantfile and its provisioning
// scripts). VMs cannot boot on the CI machine, so the tests evaluate the
// Vagrantfile (vagrantfile_test.go: every provisioning step is a script
// that the nspawn test runs) and run each provisioning script the way
// Vagrant would, inside systemd-nspawn hosts (provision_nspawn_test.go,
// build tag vagrant, `make validate-vagrant`).
package vagrant
