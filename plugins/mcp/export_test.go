package mcp

// TestPNG is the image the test server's image tool returns, for the
// external tests.
var TestPNG = testPNG
