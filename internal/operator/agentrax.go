package operator

// agentraxControllers are the controllers of the agentrax.io group.
func agentraxControllers() []Controller {
	return nil
}

// agentraxWebhooks are the admission webhooks of the agentrax.io group.
func agentraxWebhooks() []Webhook {
	return nil
}
