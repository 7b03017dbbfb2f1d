// Package gce is the cloud.Provider of Compute Engine: zonal managed
// instance groups (MIGs), global instance templates, zonal autoscalers and
// regional quotas, over the Compute API's Go client
// (google.golang.org/api/compute/v1). It is the only package of molt, with
// its test server gcefake, that imports google.golang.org/api.
//
// Groups are kept with update policy OPPORTUNISTIC and
// instanceLifecyclePolicy.defaultActionOnFailure DO_NOTHING: GCE never
// replaces or repairs an instance by itself, molt does (it creates the
// replacement, drains the old node, then deletes it). CreateGroup sets
// both; SetTemplate patches a group that has other settings before it
// changes the template.
//
// Every mutating call carries requestId = cloud.RequestID(req, call), with
// call the API method ("instanceGroupManagers.createInstances"), and the
// adapter waits for the zone (or global) operation to be DONE, for at most
// Config.OperationTimeout. GCE answers a repeated requestId with the
// operation it started the first time and changes nothing, so a new leader
// that repeats a step creates nothing twice. Instance names are the
// caller's (per-instance configs); creating a name the group has, or
// deleting one it does not have, succeeds.
//
// Errors are *Error values that wrap the cloud sentinels, classified as
// cluster-autoscaler's GCE provider reads the same API: see codeKinds and
// statusKind, and docs/cloud.md for the table.
//
// Credentials come from the application-default chain unless
// Config.ClientOptions give others; Config.Endpoint points the client at
// another server (a test server with option.WithoutAuthentication).
//
// Module versions: google.golang.org/api v0.310.0, which builds here with
// its own minimum requirements (google.golang.org/grpc v1.84.0,
// google.golang.org/genproto/googleapis/rpc
// v0.0.0-20261019180522-ce908d29299b); the module proxy refuses the
// genproto versions newer releases of google.golang.org/api need. The
// REST client needs nothing of cloud.google.com/go/compute.
package gce
