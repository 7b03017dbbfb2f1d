// Package browsertest drives the web view (package web) in headless
// Chromium through its DevTools protocol (chromedp), against a real
// coordinator member (Raft on disk, the HTTPS API) with simulated agents:
// sign-in, a live upgrade, pool commands, a viewer's refusal, every page
// (screenshots in bin/web/), and the weight and first render of a
// 15,000-node cluster's view. The package holds only tests.
package browsertest
