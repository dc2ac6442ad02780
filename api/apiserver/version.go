package apiserver

import (
	"context"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/internal/version"
)

// binaryName is the name the api's version answers carry: the binary that
// serves it (cocoonbox-api; a test's api is the same code).
const binaryName = "cocoonbox-api"

// versionService is cocoonbox.control.v1.Version: the build stamp of
// internal/version, read at each call (the Makefile's -X sets it before
// main runs).
type versionService struct{}

var _ controlv1connect.VersionHandler = versionService{}

// GetVersion implements Version.GetVersion; it never fails.
func (versionService) GetVersion(context.Context, *connect.Request[controlv1.GetVersionRequest]) (*connect.Response[controlv1.GetVersionResponse], error) {
	return connect.NewResponse(&controlv1.GetVersionResponse{Name: binaryName, Release: version.Release,
		Revision: version.Version, Version: version.String(binaryName)}), nil
}

// mountVersion mounts Version without a token check (version.proto says
// why): its request is empty, so the message bound is the only option.
func mountVersion(srv *server.Server) {
	srv.Handle(controlv1connect.NewVersionHandler(versionService{}, connect.WithReadMaxBytes(maxMessage)))
}
