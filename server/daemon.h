// Contract: the daemon's lifetime, called once from the CLI on the main thread: blocks SIGTERM/SIGINT (so
// that only the main thread receives them), starts the HTTP server with the routes of the chosen ApiMode,
// loads the model on a background thread (health answers "loading model" meanwhile), tells systemd READY=1
// once loaded, and on SIGTERM/SIGINT tells systemd STOPPING=1, stops accepting work (new generations get 503
// while in-flight ones drain), lets in-flight generations finish within the grace period (cancelling the
// rest, whose streams still end with their final line), closes the listener and returns 0. Returns 1 when the address cannot be
// bound or the model cannot be loaded.
#pragma once

#include "server/options.h"

namespace kvtrie::server {

int run_daemon(const ServeOptions& options);

}  // namespace kvtrie::server
