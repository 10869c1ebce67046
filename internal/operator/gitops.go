package operator

// gitopsControllers are the controllers of the katastroma.org group.
func gitopsControllers() []Controller {
	return nil
}

// gitopsWebhooks are the admission webhooks of the katastroma.org group.
func gitopsWebhooks() []Webhook {
	return nil
}
