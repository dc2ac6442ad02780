package boxes

import (
	"context"
	"fmt"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// Images answers the images the hosts can boot (those of the first host
// by name, oldest first) and the latest: the newest version of the desk
// tier, or of any tier when no desk image is there. Create boots the
// latest when it names no image.
func (s *Service) Images(ctx context.Context) ([]sandbox.Image, string, error) {
	return s.imagesOf(ctx, s.names[0])
}

func (s *Service) imagesOf(ctx context.Context, host string) ([]sandbox.Image, string, error) {
	sup, err := s.supervisor(host)
	if err != nil {
		return nil, "", err
	}
	imgs, err := sup.Images(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("images of host %s: %w", host, supervisorError(err))
	}
	latest := newest(imgs, "desk")
	if latest == "" {
		latest = newest(imgs, "")
	}
	return imgs, latest, nil
}

// newest is the ref of the newest version of tier ("" for any tier).
func newest(imgs []sandbox.Image, tier string) string {
	best := sandbox.Image{}
	for _, im := range imgs {
		if (tier == "" || im.Tier == tier) && im.Version > best.Version {
			best = im
		}
	}
	return best.Ref
}

// imageOn checks that host can boot ref ("" for its latest) and answers it.
func (s *Service) imageOn(ctx context.Context, host, ref string) (string, error) {
	imgs, latest, err := s.imagesOf(ctx, host)
	if err != nil {
		return "", err
	}
	if ref == "" {
		if latest == "" {
			return "", fmt.Errorf("host %s has no image to boot (make image): %w", host, ErrUnavailable)
		}
		return latest, nil
	}
	if _, err := sandbox.ParseImageRef(ref); err != nil {
		return "", invalid("image", "%q must be cbdesk:vN-TIER, e.g. cbdesk:v22-desk", ref)
	}
	for _, im := range imgs {
		if im.Ref == ref {
			return ref, nil
		}
	}
	return "", invalid("image", "%q is not an image this api can boot; Images lists them", ref)
}

// latestFor is the newest image of the box's tier on its host.
func (s *Service) latestFor(ctx context.Context, b *Box) (string, error) {
	imgs, _, err := s.imagesOf(ctx, b.Host)
	if err != nil {
		return "", err
	}
	cur, err := sandbox.ParseImageRef(b.Image)
	if err != nil {
		return "", err
	}
	if latest := newest(imgs, cur.Tier); latest != "" {
		ref, _ := sandbox.ParseImageRef(latest)
		if ref.Version > cur.Version {
			return latest, nil
		}
	}
	return b.Image, nil
}

// LatestFor answers the newest image of the box's tier and whether it is
// newer than the box's (Status's latest_image and upgrade_available).
func (s *Service) LatestFor(ctx context.Context, b *Box) (string, bool, error) {
	latest, err := s.latestFor(ctx, b)
	return latest, err == nil && latest != b.Image, err
}
