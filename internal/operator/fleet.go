package operator

// fleetControllers are the controllers of the fleetmanagement.grafana.com group.
func fleetControllers() []Controller {
	return nil
}

// fleetWebhooks are the admission webhooks of the fleetmanagement.grafana.com group.
func fleetWebhooks() []Webhook {
	return nil
}
