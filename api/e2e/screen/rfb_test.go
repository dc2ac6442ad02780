//go:build booted

package screen

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"image"
	"io"
	"net"
)

// rfb is the client side of RFB 3.8 (RFC 6143) as far as these tests
// need it: the handshake with security type None, a 32-bit true-colour
// pixel format, the Raw encoding only (so the server draws the cursor
// into the frame, as xwd does not: a few hundred pixels of difference),
// full and incremental updates, and key and pointer events. It is no
// product code: the product passes RFB through untouched.
type rfb struct {
	conn          net.Conn
	r             *bufio.Reader
	Width, Height int
	Name          string
	// fb is the framebuffer as the updates so far drew it.
	fb *image.RGBA
}

// dialRFB runs the handshake on conn: version 3.8, security None,
// ClientInit shared (the box's VNC is AlwaysShared), ServerInit, then our
// pixel format and encodings.
func dialRFB(conn net.Conn) (*rfb, error) {
	c := &rfb{conn: conn, r: bufio.NewReaderSize(conn, 1<<20)}
	banner := make([]byte, 12)
	if _, err := io.ReadFull(c.r, banner); err != nil {
		return nil, fmt.Errorf("rfb: read the banner: %w", err)
	}
	if string(banner) != "RFB 003.008\n" {
		return nil, fmt.Errorf("rfb: banner %q, want RFB 003.008", banner)
	}
	if _, err := conn.Write(banner); err != nil {
		return nil, err
	}
	var n uint8
	if err := binary.Read(c.r, binary.BigEndian, &n); err != nil {
		return nil, fmt.Errorf("rfb: security types: %w", err)
	}
	if n == 0 {
		return nil, fmt.Errorf("rfb: the server refused: %s", c.reason())
	}
	types := make([]byte, n)
	if _, err := io.ReadFull(c.r, types); err != nil {
		return nil, err
	}
	none := false
	for _, t := range types {
		none = none || t == 1
	}
	if !none {
		return nil, fmt.Errorf("rfb: security types %v lack None (1)", types)
	}
	if _, err := conn.Write([]byte{1}); err != nil {
		return nil, err
	}
	var result uint32
	if err := binary.Read(c.r, binary.BigEndian, &result); err != nil {
		return nil, fmt.Errorf("rfb: security result: %w", err)
	}
	if result != 0 {
		return nil, fmt.Errorf("rfb: security failed: %s", c.reason())
	}
	if _, err := conn.Write([]byte{1}); err != nil { // ClientInit: shared
		return nil, err
	}
	var init struct {
		W, H uint16
		PF   [16]byte
		N    uint32
	}
	if err := binary.Read(c.r, binary.BigEndian, &init); err != nil {
		return nil, fmt.Errorf("rfb: ServerInit: %w", err)
	}
	name := make([]byte, init.N)
	if _, err := io.ReadFull(c.r, name); err != nil {
		return nil, err
	}
	c.Width, c.Height, c.Name = int(init.W), int(init.H), string(name)
	c.fb = image.NewRGBA(image.Rect(0, 0, c.Width, c.Height))
	// SetPixelFormat: 32 bpp, depth 24, little endian, true colour,
	// 255 each, red at 16, green at 8, blue at 0 (BGRX in memory).
	pf := []byte{0, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0}
	// SetEncodings: Raw only.
	enc := []byte{2, 0, 0, 1, 0, 0, 0, 0}
	if _, err := conn.Write(append(pf, enc...)); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *rfb) reason() string {
	var n uint32
	if binary.Read(c.r, binary.BigEndian, &n) != nil || n > 4096 {
		return "(no reason)"
	}
	b := make([]byte, n)
	io.ReadFull(c.r, b)
	return string(b)
}

// request asks for an update of the whole screen.
func (c *rfb) request(incremental bool) error {
	m := []byte{3, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if incremental {
		m[1] = 1
	}
	binary.BigEndian.PutUint16(m[6:], uint16(c.Width))
	binary.BigEndian.PutUint16(m[8:], uint16(c.Height))
	_, err := c.conn.Write(m)
	return err
}

// key sends a key press or release of the X keysym.
func (c *rfb) key(keysym uint32, down bool) error {
	m := []byte{4, 0, 0, 0, 0, 0, 0, 0}
	if down {
		m[1] = 1
	}
	binary.BigEndian.PutUint32(m[4:], keysym)
	_, err := c.conn.Write(m)
	return err
}

// pointer moves the pointer to x, y with no button down.
func (c *rfb) pointer(x, y int) error {
	m := []byte{5, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(m[2:], uint16(x))
	binary.BigEndian.PutUint16(m[4:], uint16(y))
	_, err := c.conn.Write(m)
	return err
}

// update reads server messages until a FramebufferUpdate and draws it
// into fb; it answers the rectangles it drew. Bells and cut text are read
// and dropped.
func (c *rfb) update() ([]image.Rectangle, error) {
	for {
		t, err := c.r.ReadByte()
		if err != nil {
			return nil, err
		}
		switch t {
		case 0:
			return c.rects()
		case 2: // Bell
		case 3: // ServerCutText (its length negative for ExtendedClipboard)
			var h struct {
				Pad [3]byte
				N   int32
			}
			if err := binary.Read(c.r, binary.BigEndian, &h); err != nil {
				return nil, err
			}
			if h.N < 0 {
				h.N = -h.N
			}
			if _, err := c.r.Discard(int(h.N)); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("rfb: server message type %d not asked for", t)
		}
	}
}

func (c *rfb) rects() ([]image.Rectangle, error) {
	var h struct {
		Pad uint8
		N   uint16
	}
	if err := binary.Read(c.r, binary.BigEndian, &h); err != nil {
		return nil, err
	}
	var drawn []image.Rectangle
	for i := 0; i < int(h.N); i++ {
		var rh struct {
			X, Y, W, H uint16
			Enc        int32
		}
		if err := binary.Read(c.r, binary.BigEndian, &rh); err != nil {
			return nil, err
		}
		if rh.Enc != 0 {
			return nil, fmt.Errorf("rfb: rectangle encoding %d, asked for Raw (0) only", rh.Enc)
		}
		r := image.Rect(int(rh.X), int(rh.Y), int(rh.X)+int(rh.W), int(rh.Y)+int(rh.H))
		if !r.In(c.fb.Rect) {
			return nil, fmt.Errorf("rfb: rectangle %v outside the screen %v", r, c.fb.Rect)
		}
		row := make([]byte, 4*r.Dx())
		for y := r.Min.Y; y < r.Max.Y; y++ {
			if _, err := io.ReadFull(c.r, row); err != nil {
				return nil, err
			}
			o := c.fb.PixOffset(r.Min.X, y)
			for x := 0; x < r.Dx(); x++ {
				c.fb.Pix[o+4*x], c.fb.Pix[o+4*x+1], c.fb.Pix[o+4*x+2], c.fb.Pix[o+4*x+3] = row[4*x+2], row[4*x+1], row[4*x], 255
			}
		}
		drawn = append(drawn, r)
	}
	return drawn, nil
}

// fullFrame asks for the whole screen and reads updates until every pixel
// was drawn once: the first full frame.
func (c *rfb) fullFrame() (*image.RGBA, error) {
	if err := c.request(false); err != nil {
		return nil, err
	}
	covered := 0
	seen := make([]bool, c.Width*c.Height)
	for covered < len(seen) {
		rs, err := c.update()
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			for y := r.Min.Y; y < r.Max.Y; y++ {
				for x := r.Min.X; x < r.Max.X; x++ {
					if i := y*c.Width + x; !seen[i] {
						seen[i] = true
						covered++
					}
				}
			}
		}
		if covered < len(seen) {
			if err := c.request(true); err != nil {
				return nil, err
			}
		}
	}
	return c.fb, nil
}
