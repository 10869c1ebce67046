package plugins

// The key tables below are facts read from gNMIc's source: the mapstructure tags of each plugin's config struct
// and the kind of its field. TestTablesMatchGNMIcSource checks them against gNMIc v0.37.0 (the newest release the
// module proxy serves) on every run; the v0.47.0 additions were checked by hand against a source snapshot the
// same way (docs/gnmic.md). In v0.47.0 no key of these plugins was removed or changed its kind.

// outputs037 holds the output plugins the Output CRD offers (v1alpha1.OutputTypes), as of gNMIc v0.37.0.
var outputs037 = map[string]Keys{
	"file": {"add-target": String, "calculate-latency": Bool, "concurrency-limit": Int, "debug": Bool,
		"enable-metrics": Bool, "event-processors": StringList, "file-type": String, "filename": String, "format": String,
		"indent": String, "msg-template": String, "multiline": Bool, "override-timestamps": Bool, "separator": String,
		"split-events": Bool, "target-template": String},
	"influxdb": {"add-target": String, "batch-size": Uint, "bucket": String, "cache": Any, "cache-flush-timer": Duration,
		"debug": Bool, "delete-tag": String, "enable-metrics": Bool, "enable-tls": Bool, "event-processors": StringList,
		"flush-timer": Duration, "health-check-period": Duration, "org": String, "override-timestamps": Bool,
		"target-template": String, "timestamp-precision": String, "tls": Any, "token": String, "url": String,
		"use-gzip": Bool},
	"jetstream": {"add-target": String, "address": String, "connect-time-wait": Duration, "create-stream": Object,
		"debug": Bool, "enable-metrics": Bool, "event-processors": StringList, "format": String, "msg-template": String,
		"name": String, "num-workers": Int, "override-timestamps": Bool, "password": String, "split-events": Bool,
		"stream": String, "subject": String, "subject-format": String, "target-template": String, "tls": Any,
		"username": String, "write-timeout": Duration},
	"kafka": {"add-target": String, "address": String, "buffer-size": Int, "compression-codec": String, "debug": Bool,
		"enable-metrics": Bool, "event-processors": StringList, "flush-frequency": Duration, "format": String,
		"insert-key": Bool, "max-retry": Int, "msg-template": String, "name": String, "num-workers": Int,
		"override-timestamps": Bool, "recovery-wait-time": Duration, "required-acks": String, "sasl": Any,
		"split-events": Bool, "sync-producer": Bool, "target-template": String, "timeout": Duration, "tls": Any,
		"topic": String, "topic-prefix": String},
	"nats": {"add-target": String, "address": String, "connect-time-wait": Duration, "debug": Bool,
		"enable-metrics": Bool, "event-processors": StringList, "format": String, "msg-template": String, "name": String,
		"num-workers": Int, "override-timestamps": Bool, "password": String, "split-events": Bool, "subject": String,
		"subject-prefix": String, "target-template": String, "tls": Any, "username": String, "write-timeout": Duration},
	"prometheus": {"add-target": String, "append-subscription-name": Bool, "cache": Any, "debug": Bool,
		"enable-metrics": Bool, "event-processors": StringList, "expiration": Duration, "export-timestamps": Bool,
		"listen": String, "metric-prefix": String, "name": String, "num-workers": Int, "override-timestamps": Bool,
		"path": String, "service-registration": Object, "strings-as-labels": Bool, "target-template": String,
		"timeout": Duration, "tls": Any},
	"prometheus_write": {"add-target": String, "append-subscription-name": Bool, "authentication": Object,
		"authorization": Object, "buffer-size": Int, "debug": Bool, "enable-metrics": Bool, "event-processors": StringList,
		"headers": Object, "interval": Duration, "max-retries": Int, "max-time-series-per-write": Int, "metadata": Object,
		"metric-prefix": String, "name": String, "num-workers": Int, "num-writers": Int, "strings-as-labels": Bool,
		"target-template": String, "timeout": Duration, "tls": Any, "url": String},
	"tcp": {"add-target": String, "address": String, "buffer-size": Uint, "delimiter": String, "enable-metrics": Bool,
		"event-processors": StringList, "format": String, "keep-alive": Duration, "num-workers": Int,
		"override-timestamps": Bool, "rate": Duration, "retry-interval": Duration, "split-events": Bool,
		"target-template": String},
	"udp": {"add-target": String, "address": String, "buffer-size": Uint, "enable-metrics": Bool,
		"event-processors": StringList, "format": String, "override-timestamps": Bool, "rate": Duration,
		"retry-interval": Duration, "split-events": Bool, "target-template": String},
}

// processors037 holds every event processor gNMIc v0.37.0 registers.
var processors037 = map[string]Keys{
	"event-add-tag": {"add": Object, "condition": String, "debug": Bool, "deletes": StringList, "overwrite": Bool,
		"tag-names": StringList, "tags": StringList, "value-names": StringList, "values": StringList},
	"event-allow": {"condition": String, "debug": Bool, "tag-names": StringList, "tags": StringList,
		"value-names": StringList, "values": StringList},
	"event-combine": {"debug": Bool, "processors": List},
	"event-convert": {"debug": Bool, "type": String, "value-names": StringList},
	"event-data-convert": {"debug": Bool, "from": String, "keep": Bool, "new": String, "old": String, "to": String,
		"value-names": StringList},
	"event-date-string": {"debug": Bool, "format": String, "location": String, "precision": String,
		"tag-names": StringList, "value-names": StringList},
	"event-delete": {"debug": Bool, "tag-names": StringList, "tags": StringList, "value-names": StringList,
		"values": StringList},
	"event-drop": {"condition": String, "debug": Bool, "tag-names": StringList, "tags": StringList,
		"value-names": StringList, "values": StringList},
	"event-duration-convert": {"debug": Bool, "keep": Bool, "value-names": StringList},
	"event-extract-tags": {"debug": Bool, "overwrite": Bool, "tag-names": StringList, "tags": StringList,
		"value-names": StringList, "values": StringList},
	"event-group-by":    {"by-name": Bool, "debug": Bool, "tags": StringList},
	"event-jq":          {"condition": String, "debug": Bool, "expression": String},
	"event-merge":       {"always": Bool, "debug": Bool},
	"event-override-ts": {"debug": Bool, "precision": String},
	"event-rate-limit":  {"cache-size": Int, "debug": Bool, "per-second": Float},
	"event-starlark":    {"debug": Bool, "script": String, "source": String},
	"event-strings": {"debug": Bool, "tag-names": StringList, "tags": StringList, "transforms": List,
		"value-names": StringList, "values": StringList},
	"event-to-tag": {"debug": Bool, "keep": Bool, "value-names": StringList, "values": StringList},
	"event-trigger": {"actions": StringList, "async": Bool, "condition": String, "debug": Bool, "max-occurrences": Int,
		"min-occurrences": Int, "vars": Object, "vars-file": String, "window": Duration},
	"event-value-tag": {"consume": Bool, "debug": Bool, "tag-name": String, "value-name": String},
	"event-write": {"condition": String, "debug": Bool, "dst": String, "indent": String, "separator": String,
		"tag-names": StringList, "tags": StringList, "value-names": StringList, "values": StringList},
}

// outputsAdded047 holds the keys these output plugins gained by gNMIc v0.47.0.
var outputsAdded047 = map[string]Keys{
	"file":       {"name": String, "rotation": Object},
	"influxdb":   {"name": String},
	"jetstream":  {"buffer-size": Uint},
	"kafka":      {"kafka-version": String},
	"nats":       {"buffer-size": Uint},
	"prometheus": {"buffer-size": Int},
	"tcp":        {"max-retries": Int},
}

// processorsAdded047 holds the event processors gNMIc added by v0.47.0 (no v0.37.0 processor gained a key).
var processorsAdded047 = map[string]Keys{
	"event-ieeefloat32":  {"condition": String, "debug": Bool, "value-names": StringList},
	"event-time-epoch":   {"debug": Bool, "format": String, "precision": String, "value-names": StringList},
	"event-value-tag-v2": {"debug": Bool, "rules": List},
}
