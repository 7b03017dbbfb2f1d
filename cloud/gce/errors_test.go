package gce

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"

	"github.com/moltproject/molt/cloud"
)

func TestCodeKind(t *testing.T) {
	cases := map[string]error{
		"QUOTA_EXCEEDED":                            cloud.ErrQuota,
		"quotaExceeded":                             cloud.ErrQuota,
		"REGION_QUOTA_EXCEEDED":                     cloud.ErrQuota,
		"rateLimitExceeded":                         cloud.ErrTransient,
		"userRateLimitExceeded":                     cloud.ErrTransient,
		"RATE_LIMIT_EXCEEDED":                       cloud.ErrTransient,
		"ZONE_RESOURCE_POOL_EXHAUSTED":              cloud.ErrStockout,
		"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS": cloud.ErrStockout,
		"RESOURCE_POOL_EXHAUSTED":                   cloud.ErrStockout,
		"INSUFFICIENT_CAPACITY":                     cloud.ErrStockout,
		"RESOURCE_NOT_FOUND":                        cloud.ErrNotFound,
		"notFound":                                  cloud.ErrNotFound,
		"alreadyExists":                             cloud.ErrConflict,
		"RESOURCE_ALREADY_EXISTS":                   cloud.ErrConflict,
		"resourceInUseByAnotherResource":            cloud.ErrConflict,
		"CONDITION_NOT_MET":                         cloud.ErrConflict,
		"resourceNotReady":                          cloud.ErrTransient,
		"backendError":                              cloud.ErrTransient,
		"invalid":                                   cloud.ErrInvalid,
		"INVALID_FIELD_VALUE":                       cloud.ErrInvalid,
		"forbidden":                                 nil,
		"PERMISSIONS_ERROR":                         nil,
		"":                                          nil,
	}
	for code, want := range cases {
		assert.Equal(t, want, codeKind(code), "%q", code)
	}
}

func TestClassify(t *testing.T) {
	ctx := context.Background()
	gerr := func(status int, reasons ...string) error {
		e := &googleapi.Error{Code: status, Message: "m"}
		for _, r := range reasons {
			e.Errors = append(e.Errors, googleapi.ErrorItem{Reason: r})
		}
		return fmt.Errorf("wrapped by the client: %w", e)
	}
	cases := []struct {
		err  error
		want error
	}{
		{gerr(403, "quotaExceeded"), cloud.ErrQuota},
		{gerr(403, "rateLimitExceeded"), cloud.ErrTransient},
		{gerr(403, "forbidden"), nil},
		{gerr(403), nil},
		{gerr(404, "notFound"), cloud.ErrNotFound},
		{gerr(404), cloud.ErrNotFound},
		{gerr(409, "alreadyExists"), cloud.ErrConflict},
		{gerr(412), cloud.ErrConflict},
		{gerr(429), cloud.ErrTransient},
		{gerr(500), cloud.ErrTransient},
		{gerr(503, "backendError"), cloud.ErrTransient},
		{gerr(400, "invalid"), cloud.ErrInvalid},
		{gerr(400, "resourceNotReady"), cloud.ErrTransient},
		{gerr(400, "someUnknownReason"), cloud.ErrInvalid},
		{gerr(400, "someUnknownReason", "QUOTA_EXCEEDED"), cloud.ErrQuota},
		{errors.New("dial tcp: connection refused"), cloud.ErrTransient},
	}
	for _, c := range cases {
		err := classify(ctx, "test.call", c.err)
		var e *Error
		if assert.ErrorAs(t, err, &e, "%v", c.err) {
			assert.Equal(t, c.want, e.Kind, "%v", c.err)
		}
		var g *googleapi.Error
		if errors.As(c.err, &g) {
			assert.ErrorAs(t, err, &g, "the client's error stays reachable")
		}
	}
	assert.True(t, isAlreadyExists(classify(ctx, "x", gerr(409, "alreadyExists"))))
	assert.False(t, isAlreadyExists(classify(ctx, "x", gerr(409, "resourceInUseByAnotherResource"))))
}

func TestInstanceStatus(t *testing.T) {
	cases := []struct {
		action, status string
		want           cloud.InstanceStatus
	}{
		{"CREATING", "", cloud.StatusCreating},
		{"CREATING_WITHOUT_RETRIES", "", cloud.StatusCreating},
		{"VERIFYING", "RUNNING", cloud.StatusCreating},
		{"RECREATING", "STAGING", cloud.StatusRecreating},
		{"DELETING", "RUNNING", cloud.StatusDeleting},
		{"ABANDONING", "RUNNING", cloud.StatusDeleting},
		{"NONE", "RUNNING", cloud.StatusRunning},
		{"RESTARTING", "RUNNING", cloud.StatusRunning},
		{"NONE", "PROVISIONING", cloud.StatusCreating},
		{"NONE", "STAGING", cloud.StatusCreating},
		{"NONE", "TERMINATED", cloud.StatusStopped},
		{"NONE", "STOPPED", cloud.StatusStopped},
		{"NONE", "SUSPENDED", cloud.StatusStopped},
	}
	for _, c := range cases {
		got := instanceStatus(&compute.ManagedInstance{CurrentAction: c.action, InstanceStatus: c.status})
		assert.Equal(t, c.want, got, "%s/%s", c.action, c.status)
	}
}

func TestErrorMessage(t *testing.T) {
	e := &Error{Call: "instanceGroupManagers.resize", Status: http.StatusForbidden, Code: "quotaExceeded", Message: "Quota exceeded", Kind: cloud.ErrQuota}
	assert.Equal(t, "gce: instanceGroupManagers.resize: 403 quotaExceeded: Quota exceeded (quota exceeded)", e.Error())
	assert.True(t, cloud.Retryable(e))
}
