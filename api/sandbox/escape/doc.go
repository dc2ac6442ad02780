// Package escape is the box escape suite (issue 37, Deliver 3): its tests
// boot boxes under the local supervisor and try, from inside as the box's
// user through the door (the way rsh runs), as root through sudo in a
// door-started tree and as root in a unit the box's own systemd starts,
// each known way out of a container; every attempt must fail with nothing
// changed on the host. The attempts are the probe command (probe/), built
// by the tests and copied into the boxes; its cases name their escape
// class. The package itself is only what the two share: the probe's
// Config and its Result line.
package escape
