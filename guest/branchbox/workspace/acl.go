package workspace

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// POSIX ACL xattr encoding (linux/posix_acl_xattr.h): a version 2 header,
// then (tag, perm, id) entries sorted by tag.
const (
	aclVersion   = 2
	aclUserObj   = 0x01
	aclGroupObj  = 0x04
	aclOther     = 0x20
	aclUndefined = 0xffffffff
)

// setDefaultACL gives the directory fd the default ACL u::rwx g::rwx
// o::---: what is created below it gets owner and group access and none
// for others whatever the creator's umask (a default ACL replaces the
// umask), and new directories inherit the same default.
func setDefaultACL(fd int, path string) error {
	buf := binary.LittleEndian.AppendUint32(nil, aclVersion)
	for _, e := range [][2]uint16{{aclUserObj, 7}, {aclGroupObj, 7}, {aclOther, 0}} {
		buf = binary.LittleEndian.AppendUint16(buf, e[0])
		buf = binary.LittleEndian.AppendUint16(buf, e[1])
		buf = binary.LittleEndian.AppendUint32(buf, aclUndefined)
	}
	if err := unix.Fsetxattr(fd, "system.posix_acl_default", buf, 0); err != nil {
		return fmt.Errorf("set the default ACL of %s: %w", path, err)
	}
	return nil
}
