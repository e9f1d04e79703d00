// Words of the tickets area that others name (the domain events, the sockets) without importing the service.

export type TicketAction = 'created' | 'updated' | 'status_changed' | 'assigned' | 'note_added' | 'replied' | 'merged' | 'linked' | 'deleted';
