package world

import (
	"math/rand/v2"
	"sort"
)

// Site is a BUGGIFY fault site: a place in the world where a fault may fire.
// Every site models a fault the contract must survive.
type Site string

// Fault sites.
const (
	// SiteNetDelay delays a message by up to Settings.LongDelayMaxMs extra.
	SiteNetDelay Site = "net.delay"
	// SiteNetDrop drops a request before it arrives (nothing happened).
	SiteNetDrop Site = "net.drop"
	// SiteLostReply drops a reply AFTER its request took effect (the uncertain outcome, Q-1).
	SiteLostReply Site = "net.lost-reply"
	// SiteDupReply delivers a reply twice (the second must be ignored).
	SiteDupReply Site = "net.duplicate-reply"
	// SiteSlowWrite makes a WRITE land late, possibly after both sides' deadlines.
	SiteSlowWrite Site = "xfer.slow-write"
	// SiteWriteError makes a WRITE fail after the entry left the table; it may have landed.
	SiteWriteError Site = "xfer.write-error"
	// SiteEncoderFail fails an encoder step (C-6).
	SiteEncoderFail Site = "encoder.fail"
	// SiteEncoderLate makes an encoder step complete late (C-1, C-2 for the publish path).
	SiteEncoderLate Site = "encoder.late"
	// SiteENOSPC fails writing a published entry's file (nothing published).
	SiteENOSPC Site = "disk.enospc"
	// SiteSlowRemove delays a removal so a consumer's claim can race it (SU-1, SU-3).
	SiteSlowRemove Site = "disk.slow-remove"
	// SiteVanish makes a published file vanish (another process; X-2).
	SiteVanish Site = "disk.vanish"
	// SiteRemoveError fails a removal with an I/O error.
	SiteRemoveError Site = "disk.remove-error"
	// SiteConsumerCrash crashes a consumer, which restarts later; on the
	// shared directory it may also die inside shareddir.Claim after the
	// rename won, leaving an orphan for E's CollectOrphans.
	SiteConsumerCrash Site = "process.consumer-crash"
	// SiteLateCancel cancels a client while its consume is in flight (C-4).
	SiteLateCancel Site = "client.late-cancel"
	// SiteDupRelease sends a client's Abort twice (SU-3).
	SiteDupRelease Site = "client.duplicate-release"
	// SiteShutdown sends Shutdown to the producer at a random time (S-1, S-2).
	SiteShutdown Site = "process.producer-shutdown"
	// SiteSendFails fails the send of EncoderReady after publication (C-7).
	SiteSendFails Site = "publish.send-fails"
	// SitePlainInvalid replaces a TransferEncoderCache reply with a plain
	// INVALID_ARGUMENT without the before-write trailer (a proxy's answer;
	// the request may have taken effect: Q-2 says it is uncertain).
	SitePlainInvalid Site = "net.plain-invalid-argument"
)

// AllSites lists every fault site, sorted.
var AllSites = func() []Site {
	s := []Site{SiteNetDelay, SiteNetDrop, SiteLostReply, SiteDupReply, SiteSlowWrite, SiteWriteError,
		SiteEncoderFail, SiteEncoderLate, SiteENOSPC, SiteSlowRemove, SiteVanish, SiteRemoveError,
		SiteConsumerCrash, SiteLateCancel, SiteDupRelease, SiteShutdown, SiteSendFails, SitePlainInvalid}
	s = append(s, nodeSites...) // nodes_settings.go
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}()

// faults decides, from the faults stream only, whether an enabled site fires.
type faults struct {
	rng *rand.Rand
	// Enabled is the sites this seed enables: set by init, read-only after
	// (on mirrors it for the sites of AllSites).
	Enabled map[Site]bool
	fireP   float64
	Healed  bool
	// fired counts the fires of each site of AllSites, by index
	// (siteIndex); firedOther those of any other site (nil until one
	// fires). Result.Fired is built from them when the run ends (Fired):
	// a string-keyed map assign per fire was a sizeable part of Buggify.
	fired      [maxSites]int32
	firedOther map[Site]int
	// cov counts fires by lifecycle point (coverage.go).
	cov *runCoverage
	// on has the bit 1<<i set when the site of index i is enabled (its
	// Enabled entry, set in init).
	on uint32
}

// siteSlots is an open-addressing table of AllSites by a hash of the name
// (siteHash, then the next slots): each site's index + 1, 0 for an empty
// slot. Buggify runs a few times a step, and the string-keyed map lookups
// of siteIndex and Enabled were a sizeable part of its cost.
var siteSlots = func() (t [numSiteSlots]uint8) {
	for i, site := range AllSites {
		h := siteHash(site)
		for t[h] != 0 {
			h = (h + 1) % len(t)
		}
		t[h] = uint8(i + 1)
	}
	return t
}()

// siteHash is the first slot of site (not empty) in siteSlots.
func siteHash(site Site) int {
	n := len(site)
	h := n*2 + int(site[n-1])
	if n >= 3 {
		h += int(site[n-3]) * 10
	}
	return h % numSiteSlots
}

// numSiteSlots is the size of siteSlots.
const numSiteSlots = 64

// lookupSite returns site's index in AllSites (siteIndex's answer,
// through siteSlots); known is false for any other string.
func lookupSite(site Site) (ix uint8, known bool) {
	if len(site) == 0 {
		return 0, false
	}
	// The table has empty slots (len(AllSites) <= maxSites < numSiteSlots), so the
	// probe ends.
	for h := siteHash(site); ; h = (h + 1) % numSiteSlots {
		v := siteSlots[h]
		if v == 0 {
			return 0, false
		}
		if AllSites[v-1] == site {
			return v - 1, true
		}
	}
}

// init makes f the faults of settings s drawing from rng, with enabled
// (empty) as its map of enabled sites if not nil, and returns f.
func (f *faults) init(rng *rand.Rand, s Settings, enabled map[Site]bool) *faults {
	if enabled == nil {
		enabled = map[Site]bool{}
	}
	*f = faults{rng: rng, Enabled: enabled, fireP: s.FireProbability}
	for _, site := range s.Faults {
		f.Enabled[site] = true
		if ix, known := lookupSite(site); known {
			f.on |= 1 << ix
		}
	}
	return f
}

// On reports whether site is enabled (Enabled[site], without its lookup).
func (f *faults) On(site Site) bool {
	if ix, known := lookupSite(site); known {
		return f.on&(1<<ix) != 0
	}
	return f.Enabled[site]
}

// Buggify reports whether site fires at this hit. A disabled site, or any
// site after heal, draws nothing, so healing does not shift the stream's use
// elsewhere.
func (f *faults) Buggify(site Site) bool {
	if ix, known := lookupSite(site); known {
		return f.buggifyAt(ix)
	}
	// A site outside AllSites.
	if f.Healed || !f.Enabled[site] {
		return false
	}
	if f.rng.Float64() < f.fireP {
		if f.firedOther == nil {
			f.firedOther = map[Site]int{}
		}
		f.firedOther[site]++
		f.cov.fire(0) // siteIndex's answer for it
		return true
	}
	return false
}

// buggifyAt is Buggify of the site of index ix in AllSites.
func (f *faults) buggifyAt(ix uint8) bool {
	if f.Healed || f.on&(1<<ix) == 0 {
		return false
	}
	if f.rng.Float64() < f.fireP {
		f.fired[ix]++
		f.cov.fire(ix)
		return true
	}
	return false
}

// The indexes in AllSites of the sites World.Send hits for every message
// (it calls buggifyAt with them: finding a site's index at each of a few
// hundred hits a run was a percent and a half of a run).
var (
	ixNetDrop      = mustLookupSite(SiteNetDrop)
	ixPlainInvalid = mustLookupSite(SitePlainInvalid)
	ixLostReply    = mustLookupSite(SiteLostReply)
	ixNetDelay     = mustLookupSite(SiteNetDelay)
	ixDupReply     = mustLookupSite(SiteDupReply)
	ixDupRelease   = mustLookupSite(SiteDupRelease)
)

// mustLookupSite is lookupSite of a site of AllSites.
func mustLookupSite(site Site) uint8 {
	ix, known := lookupSite(site)
	if !known {
		panic("sim: unknown fault site " + string(site))
	}
	return ix
}

// Fired returns how often each site fired, by site (Result.Fired): only
// the sites that fired, in a new map.
func (f *faults) Fired() map[Site]int {
	n := len(f.firedOther)
	for _, c := range f.fired {
		if c != 0 {
			n++
		}
	}
	m := make(map[Site]int, n)
	for i, c := range f.fired {
		if c != 0 {
			m[AllSites[i]] = int(c)
		}
	}
	for site, c := range f.firedOther {
		m[site] += c
	}
	return m
}
