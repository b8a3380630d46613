// Package profiles handles base profiles: Chromium user data directories
// (logged-in templates) that an operator uploads as a tar.gz and that
// browser sessions start from.
//
// Everything that goes in or out passes the same filter (Filter): data
// Chromium regenerates or that only records what the profile's user did —
// caches, crash reports, history and other telemetry, session-restore
// state, DRM plugins, lock files, component downloads — is dropped; what can
// hold login state (cookies, Local Storage, IndexedDB, Login Data, Web
// Data, Preferences, Local State, extension state) is kept, and so is every
// entry the filter does not know.
//
// Archives are unpacked confined to their target (Unpack, with os.Root):
// symlinks, hard links and special files are skipped, a path that would
// escape the target is ErrUnsafePath, and the limits of Limits give
// ErrTooLarge. Normalize re-packs an upload, filtered, for the Store (a
// NATS JetStream object store every worker fetches from); Pack archives a
// profile directory.
//
// Paths are relative to the profile root, which is Chromium's user data
// directory (--user-data-dir): it holds "Local State" and the profile
// directories ("Default", "Profile 1", …). Pack a profile with
//
//	tar -C ~/chromium-profile -czf gemini.tgz .
//
// Make the profile with a Chromium started with --password-store=basic,
// as workers are: otherwise Chromium encrypts its cookies and passwords
// with a key from the desktop's keyring, and a worker cannot read them.
package profiles

import (
	"path"
	"strings"
)

// Reasons a path is dropped, as Filter reports them.
const (
	WhyCache     = "cache"
	WhyCrash     = "crash reports"
	WhyHistory   = "history"
	WhyTelemetry = "telemetry"
	WhySession   = "session restore"
	WhyDRM       = "DRM plugin"
	WhyLock      = "lock file"
	WhyComponent = "component download"
	WhyLog       = "log"
)

type rule struct {
	pattern string // path.Match patterns of the leading components, "/"-separated
	why     string
}

// rootRules apply to the entries of the user data directory itself.
var rootRules = []rule{
	{"Crashpad", WhyCrash},
	{"Crash Reports", WhyCrash},
	{"BrowserMetrics*", WhyTelemetry}, // BrowserMetrics/, BrowserMetrics-spare.pma
	{"DeferredBrowserMetrics", WhyTelemetry},
	{"optimization_guide*", WhyTelemetry},
	{"Safe Browsing*", WhyTelemetry},
	{"segmentation_platform", WhyTelemetry},
	{"WidevineCdm", WhyDRM},
	{"MediaFoundationWidevineCdm", WhyDRM},
	{"SingletonLock", WhyLock},
	{"SingletonCookie", WhyLock},
	{"SingletonSocket", WhyLock},
	{"lockfile", WhyLock},
	{"RunningChromeVersion", WhyLock},
	{"component_crx_cache", WhyCache},
	{"GPUPersistentCache", WhyCache},
	{"Variations", WhyTelemetry},
	{"extensions_crx_cache", WhyCache},
	{"Webstore Downloads", WhyCache},
	// Component updater downloads: Chromium fetches them again (workers
	// run with --disable-component-update and do without).
	{"ActorSafetyLists", WhyComponent},
	{"AmountExtractionHeuristicRegexes", WhyComponent},
	{"AutofillStates", WhyComponent},
	{"CaptchaProviders", WhyComponent},
	{"CertificateRevocation", WhyComponent},
	{"CookieReadinessList", WhyComponent},
	{"Crowd Deny", WhyComponent},
	{"FileTypePolicies", WhyComponent},
	{"FirstPartySetsPreloaded", WhyComponent},
	{"hyphen-data", WhyComponent},
	{"MaskedDomainListPreloaded", WhyComponent},
	{"MEIPreload", WhyComponent},
	{"OnDeviceHeadSuggestModel", WhyComponent},
	{"OptimizationGuideModelsManifest", WhyComponent},
	{"OptimizationHints", WhyComponent},
	{"OriginTrials", WhyComponent},
	{"PKIMetadata", WhyComponent},
	{"PrivacySandboxAttestationsPreloaded", WhyComponent},
	{"ProbabilisticRevealTokenRegistry", WhyComponent},
	{"RecoveryImproved", WhyComponent},
	{"SafetyTips", WhyComponent},
	{"screen_ai", WhyComponent},
	{"SSLErrorAssistant", WhyComponent},
	{"Subresource Filter", WhyComponent},
	{"TpcdMetadata", WhyComponent},
	{"TrustTokenKeyCommitments", WhyComponent},
	{"WasmTtsEngine", WhyComponent},
	{"ZxcvbnData", WhyComponent},
}

// profileRules apply inside a profile directory (Default, Profile 1, …).
var profileRules = []rule{
	{"Application Cache", WhyCache},
	{"blob_storage", WhyCache},
	{"Download Service", WhyCache},
	{"Media Cache", WhyCache},
	{"Shared Dictionary", WhyCache},
	{"VideoDecodeStats", WhyCache},
	{"BudgetDatabase", WhyCache},
	{"Site Characteristics Database", WhyCache},
	{"shared_proto_db", WhyCache},
	{"commerce_subscription_db", WhyCache},
	{"chrome_cart_db", WhyCache},
	{"discounts_db", WhyCache},
	{"discount_infos_db", WhyCache},
	{"parcel_tracking_db", WhyCache},
	{"PersistentOriginTrials", WhyCache},

	{"History", WhyHistory},
	{"History-journal", WhyHistory},
	{"History Provider Cache", WhyHistory},
	{"Visited Links", WhyHistory},
	{"Top Sites*", WhyHistory},
	{"Favicons*", WhyHistory},
	{"Shortcuts*", WhyHistory},
	{"Network Action Predictor*", WhyHistory},
	{"Media History*", WhyHistory},
	{"DIPS*", WhyHistory},
	{"Thumbnails", WhyHistory},
	{"BrowsingTopicsSiteData*", WhyHistory},
	{"BrowsingTopicsState", WhyHistory},

	{"Safe Browsing*", WhyTelemetry},
	{"optimization_guide*", WhyTelemetry},
	{"segmentation_platform", WhyTelemetry},
	{"Segmentation Platform", WhyTelemetry},
	{"Feature Engagement Tracker", WhyTelemetry},
	{"SCT Auditing Pending Reports", WhyTelemetry},
	{"declarative_performance_observer.db*", WhyTelemetry},
	{"heavy_ad_intervention_opt_out.db*", WhyTelemetry},
	{"previews_opt_out.db*", WhyTelemetry},
	{"Reporting and NEL*", WhyTelemetry},
	{"Network/Reporting and NEL*", WhyTelemetry},
	{"Conversions*", WhyTelemetry},

	// Session restore: the tabs of the last session and their
	// sessionStorage, which only a restored tab reads back.
	{"Sessions", WhySession},
	{"Sessions_Encrypted", WhySession},
	{"Current Session", WhySession},
	{"Current Tabs", WhySession},
	{"Last Session", WhySession},
	{"Last Tabs", WhySession},
	{"Session Storage", WhySession},
}

// anyRules drop a path with a component of the name, at any depth: caches
// also live inside Service Worker/, Storage/ext/… and the profile root.
// LOCK and LOG are LevelDB's lock file and debug log (Local Storage,
// IndexedDB, extension settings): LevelDB creates them again when it
// opens the database.
var anyRules = map[string]string{
	"Cache":             WhyCache,
	"Code Cache":        WhyCache,
	"GPUCache":          WhyCache,
	"ShaderCache":       WhyCache,
	"GrShaderCache":     WhyCache,
	"GraphiteDawnCache": WhyCache,
	"DawnCache":         WhyCache,
	"DawnGraphiteCache": WhyCache,
	"DawnWebGPUCache":   WhyCache,
	"CacheStorage":      WhyCache, // Service Worker/CacheStorage
	"ScriptCache":       WhyCache, // Service Worker/ScriptCache
	"LOCK":              WhyLock,
	"LOG":               WhyLog,
	"LOG.old":           WhyLog,
}

// Filter says whether the entry at rel (a "/"-separated path relative to
// the profile root; "./" prefixes and a trailing "/" are fine) belongs in
// a base profile. A dropped entry comes with the reason (one of the Why
// constants); entries the filter does not know are kept. Dropping a
// directory drops everything under it.
func Filter(rel string) (keep bool, why string) {
	rel = path.Clean("/" + rel)[1:]
	if rel == "" {
		return true, ""
	}
	comps := strings.Split(rel, "/")
	for _, c := range comps {
		if why, ok := anyRules[c]; ok {
			return false, why
		}
	}
	if why := match(rootRules, comps); why != "" {
		return false, why
	}
	if len(comps) > 1 && isProfileDir(comps[0]) {
		if why := match(profileRules, comps[1:]); why != "" {
			return false, why
		}
	}
	return true, ""
}

// isProfileDir reports whether name is one of Chromium's profile
// directories inside a user data directory.
func isProfileDir(name string) bool {
	if name == "Default" || name == "Guest Profile" || name == "System Profile" {
		return true
	}
	ok, _ := path.Match("Profile *", name)
	return ok
}

func match(rules []rule, comps []string) string {
	for _, r := range rules {
		segs := strings.Split(r.pattern, "/")
		if len(comps) < len(segs) {
			continue
		}
		all := true
		for i, s := range segs {
			if ok, _ := path.Match(s, comps[i]); !ok {
				all = false
				break
			}
		}
		if all {
			return r.why
		}
	}
	return ""
}
