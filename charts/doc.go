// Package charts holds the tests of the Helm charts in this directory: they
// render each chart with Helm's own Go packages, lint it with Helm's rules
// and decode every object strictly into its Kubernetes API type.
package charts
